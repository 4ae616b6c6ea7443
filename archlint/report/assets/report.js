// archlint HTML report: draws the charts (Chart.js), the OpGraph (coordinates computed by
// archlint/report/layout.py) and the layer table from the JSON embedded in the page.
"use strict";
(function () {
  const t0 = performance.now();
  const DATA = JSON.parse(document.getElementById("archlint-data").textContent);
  const FAMILY = DATA.families;
  // Colour by kind; each family shares a hue range (compute blue, element-wise orange,
  // memory-only green, the rest grey/purple) so the family reads at a glance.
  const KIND_COLOUR = {
    conv: "#1f5fbf",
    linear: "#3b86e6",
    matmul: "#5aa0f2",
    attention: "#0c3c86",
    elementwise: "#f08a24",
    activation: "#f5b041",
    norm: "#d4651c",
    dropout: "#f7c98b",
    concat: "#2e9d5b",
    split: "#58c285",
    copy: "#1f6e3f",
    reshape: "#9bdcb4",
    creation: "#7fb08f",
    upsample: "#3fae9a",
    pool: "#8e6cc9",
    reduction: "#b39ddb",
    embedding: "#6a4fa3",
    other: "#9aa0ad",
    input: "#c7ccd6",
  };
  const colour = (kind) => KIND_COLOUR[kind] || "#9aa0ad";
  Chart.defaults.animation = false;
  Chart.defaults.font.size = 11;
  Chart.defaults.maintainAspectRatio = false;

  const esc = (s) =>
    String(s).replace(
      /[&<>"']/g,
      (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c],
    );
  function si(n, unit) {
    if (n === null || n === undefined) return "—";
    const a = Math.abs(n);
    for (const [f, p] of [
      [1e12, "T"],
      [1e9, "G"],
      [1e6, "M"],
      [1e3, "K"],
    ])
      if (a >= f) return (n / f).toPrecision(3) + " " + p + unit;
    return +n.toPrecision(3) + " " + unit;
  }
  const count = (n) => si(n, "").trim();
  const bytes = (n) => si(n, "B");
  const ms = (v) => (v === null || v === undefined ? "—" : +v.toPrecision(3) + " ms");
  // No op beats its roof: above 100% the roof was measured low (a busy machine), said so.
  const efficiency = (v) => (v > 1 ? ">100% (roof low)" : (100 * v).toFixed(0) + "%");
  const shape = (s) => (s || []).map((d) => d.join("×")).join(", ");
  const decade = (unit) => (v) => {
    const e = Math.log10(v);
    return Math.abs(e - Math.round(e)) < 1e-9 ? si(v, unit) : "";
  };

  function ModelView(m, i) {
    this.m = m;
    this.i = i;
    this.cost = m.layers.map((L) => (m.measured ? L.lat || 0 : m.estimated ? L.est || 0 : L.known ? L.mac : 0));
    this.metric = m.measured ? "measured latency" : m.estimated ? "ESTIMATED latency (device spec)" : "MAC bytes (latency not measured)";
    this.selected = null;
    this.roofline();
    this.timeBars();
    this.kindShare();
    this.graph = new GraphView(this);
    this.table();
    const section = document.getElementById("model-" + i);
    section.querySelectorAll("a.op").forEach((a) =>
      a.addEventListener("click", (ev) => {
        ev.preventDefault();
        this.select(a.dataset.op, true);
      }),
    );
  }

  ModelView.prototype.indexOf = function (name) {
    if (!this._index) {
      this._index = new Map();
      this.m.layers.forEach((L, k) => this._index.set(L.name, k));
    }
    return this._index.has(name) ? this._index.get(name) : null;
  };

  ModelView.prototype.select = function (nameOrIndex, scroll) {
    const k = typeof nameOrIndex === "number" ? nameOrIndex : this.indexOf(nameOrIndex);
    if (k === null) return;
    this.selected = k;
    this.details(k);
    this.graph.highlight(k, true);
    let row = document.querySelector(`#table-${this.i} tr[data-k="${k}"]`);
    if (!row) {
      this.showRow(k);
      row = document.querySelector(`#table-${this.i} tr[data-k="${k}"]`);
    }
    document.querySelectorAll(`#table-${this.i} tr.sel`).forEach((r) => r.classList.remove("sel"));
    if (row) {
      row.classList.add("sel");
      row.scrollIntoView({ block: "nearest" });
    }
    if (scroll) document.getElementById("graph-" + this.i).scrollIntoView({ block: "center" });
  };

  ModelView.prototype.details = function (k) {
    const L = this.m.layers[k];
    const rows = [
      ["name", L.display],
      ["id", L.name],
      ["op", L.op],
      ["kind", L.kind],
      ["module", L.module || "(top level)"],
      ["inputs", shape(L.in)],
      ["outputs", shape(L.out)],
      ["dtype", L.dtype || "—"],
      ["FLOPs", L.known ? count(L.flops) + " (multiply-adds)" : "no cost formula"],
      ["MAC", L.known ? bytes(L.mac) : "—"],
      ["params", count(L.params)],
      [
        "latency",
        L.lat === null
          ? "not measured"
          : ms(L.lat) + (L.spread ? ` (q1–q3 ${ms(L.spread[0])}–${ms(L.spread[1])})` : ""),
      ],
    ];
    if (L.roof)
      rows.push([
        "roofline",
        `${L.roof.bound}-bound${L.roof.memory_roof === "cache" ? " (its bytes fit in cache: under the cache roof)" : ""}, intensity ${(+L.roof.intensity).toPrecision(3)} FLOP/B, attainable ${ms(L.roof.attainable_ms)}, efficiency ${efficiency(L.roof.efficiency)}`,
      ]);
    if (L.attrs && Object.keys(L.attrs).length) rows.push(["attrs", JSON.stringify(L.attrs)]);
    if (L.findings.length) rows.push(["findings", L.findings.join(", ")]);
    document.getElementById("details-" + this.i).innerHTML =
      "<table>" + rows.map(([a, b]) => `<tr><th>${esc(a)}</th><td>${esc(b)}</td></tr>`).join("") + "</table>";
  };

  // ------------------------------------------------------------------ roofline
  ModelView.prototype.roofline = function () {
    const m = this.m,
      peaks = m.peaks;
    const mode = m.measured ? "achieved" : m.estimated ? "estimated" : peaks ? "attainable" : "work";
    const byKind = new Map();
    let skipped = 0,
      lo = Infinity,
      hi = 0;
    m.layers.forEach((L, k) => {
      const work = 2 * L.flops;
      let y = null;
      if (!L.known || work <= 0 || L.mac <= 0) {
        skipped++;
        return;
      }
      const x = L.roof && L.roof.intensity ? L.roof.intensity : work / L.mac;
      if (mode === "achieved") y = L.lat ? work / (L.lat / 1e3) : null;
      else if (mode === "estimated") y = L.est ? work / (L.est / 1e3) : null;
      else if (mode === "attainable") y = Math.min(peaks.flops, x * peaks.bandwidth);
      else y = work;
      if (!(y > 0)) {
        skipped++;
        return;
      }
      lo = Math.min(lo, x);
      hi = Math.max(hi, x);
      if (!byKind.has(L.kind)) byKind.set(L.kind, []);
      byKind.get(L.kind).push({ x, y, k });
    });
    const datasets = [...byKind.entries()].map(([kind, data]) => ({
      type: "scatter",
      label: kind,
      data,
      backgroundColor: colour(kind) + "cc",
      borderColor: colour(kind),
      pointRadius: 4,
      pointHoverRadius: 7,
    }));
    if (peaks && isFinite(lo)) {
      const ridge = peaks.flops / peaks.bandwidth;
      const x0 = Math.min(lo / 2, ridge / 8),
        x1 = Math.max(hi * 2, ridge * 8);
      datasets.push({
        type: "line",
        label: "device roofs",
        data: [
          { x: x0, y: x0 * peaks.bandwidth },
          { x: ridge, y: peaks.flops },
          { x: x1, y: peaks.flops },
        ],
        borderColor: "#1d2330",
        borderWidth: 2,
        pointRadius: 0,
        fill: false,
        order: 10,
      });
      if (peaks.cache_bandwidth && peaks.cache_bandwidth > peaks.bandwidth) {
        // the roof of ops whose bytes fit in cache: dashed, up to where it meets the compute roof
        const cacheRidge = peaks.flops / peaks.cache_bandwidth;
        datasets.push({
          type: "line",
          label: "cache roof",
          data: [
            { x: Math.min(x0, cacheRidge / 8), y: Math.min(x0, cacheRidge / 8) * peaks.cache_bandwidth },
            { x: cacheRidge, y: peaks.flops },
            { x: ridge, y: peaks.flops }, // then along the compute roof to where the memory roof meets it
          ],
          borderColor: "#1d2330",
          borderDash: [6, 4],
          borderWidth: 1.5,
          pointRadius: 0,
          fill: false,
          order: 11,
        });
      }
    }
    const yTitle = {
      achieved: "achieved FLOP/s (2 × multiply-adds / measured latency)",
      attainable: "attainable FLOP/s (roofline model: latency not measured)",
      estimated: "ESTIMATED FLOP/s (2 × multiply-adds / estimated latency)",
      work: "work (FLOP = 2 × multiply-adds)",
    }[mode];
    const cap = {
      achieved:
        `Every op that computes: arithmetic intensity against the FLOP/s it achieved on ${esc(m.peaks ? m.peaks.device || "the device" : "the device")}` +
        (peaks
          ? `; the line is the device's measured roofs (${si(peaks.flops, "FLOP/s")}, ${si(peaks.bandwidth, "B/s")} from memory)` +
            (peaks.cache_bandwidth
              ? `; an op whose bytes fit in the last-level cache (up to ${bytes(peaks.cache_bytes)}) is held to the cache roof, ${si(peaks.cache_bandwidth, "B/s")}.`
              : ".")
          : "; no device roofs were measured."),
      estimated: `ESTIMATED, not measured: each op at the FLOP/s the device-spec estimate gives it on ${esc(peaks ? peaks.device : "the spec")}; the line is the spec's roofs (${si(peaks ? peaks.flops : 0, "FLOP/s")}, ${si(peaks ? peaks.bandwidth : 0, "B/s")}).`,
      attainable: `Latency was not measured (run with --latency): ops sit on the roof at the FLOP/s the roofline model allows (${si(peaks ? peaks.flops : 0, "FLOP/s")}, ${si(peaks ? peaks.bandwidth : 0, "B/s")}).`,
      work: "Latency was not measured and no device roofs are known (run with --latency): each op's arithmetic intensity against its work. Left of the others means memory-bound on any device.",
    }[mode];
    document.getElementById("roof-cap-" + this.i).innerHTML =
      cap +
      (skipped
        ? ` ${skipped} op${skipped === 1 ? "" : "s"} without arithmetic or memory traffic (views, no formula${m.measured ? ", or not timed" : ""}) are not plotted.`
        : "");
    const self = this;
    this.roofChart = new Chart(document.getElementById("roof-" + this.i), {
      data: { datasets },
      options: {
        parsing: false,
        normalized: true,
        scales: {
          x: {
            type: "logarithmic",
            ticks: { callback: decade("") },
            title: {
              display: true,
              text: "arithmetic intensity (FLOP/byte = 2 × multiply-adds / MAC bytes)",
            },
          },
          y: {
            type: "logarithmic",
            ticks: { callback: decade(mode === "work" ? "FLOP" : "FLOP/s") },
            title: { display: true, text: yTitle },
          },
        },
        plugins: {
          legend: { position: "right" },
          tooltip: {
            callbacks: {
              label: (c) => {
                if (c.raw.k === undefined) return "device roof";
                const L = m.layers[c.raw.k];
                return `${L.display} (${L.kind}): ${(+c.raw.x).toPrecision(3)} FLOP/B, ${si(c.raw.y, mode === "work" ? "FLOP" : "FLOP/s")}`;
              },
            },
          },
        },
        onClick: (ev, els) => {
          if (els.length) {
            const p = els[0];
            const raw = self.roofChart.data.datasets[p.datasetIndex].data[p.index];
            if (raw.k !== undefined) self.select(raw.k, false);
          }
        },
      },
    });
  };

  // ------------------------------------------------------------------ where the time goes
  ModelView.prototype.timeBars = function () {
    const m = this.m,
      TOP = 30;
    const order = m.layers
      .map((_, k) => k)
      .filter((k) => this.cost[k] > 0)
      .sort((a, b) => this.cost[b] - this.cost[a]);
    const top = order.slice(0, TOP),
      rest = order.slice(TOP);
    const total = order.reduce((s, k) => s + this.cost[k], 0);
    const fmt = m.measured || m.estimated ? ms : bytes;
    const labels = top.map((k) => m.layers[k].display);
    const values = top.map((k) => this.cost[k]);
    const colours = top.map((k) => colour(m.layers[k].kind));
    const restShare = rest.reduce((s, k) => s + this.cost[k], 0) / (total || 1);
    const untimed = m.measured ? m.layers.filter((L) => L.lat === null).length : 0;
    document.getElementById("time-cap-" + this.i).textContent =
      (m.measured
        ? `Per-op latency (median of repeats), costliest first; the ops sum to ${ms(total)}.` +
          (untimed
            ? ` ${untimed} op${untimed === 1 ? " was" : "s were"} not timed on their own and are left out.`
            : "")
        : m.estimated
        ? `ESTIMATED per-op latency from the device spec (not measured), costliest first; the ops sum to ${ms(total)}.`
        : `Latency was not measured (run with --latency): per-op MAC instead, costliest first; ${bytes(total)} in all.`) +
      (rest.length
        ? ` The ${top.length} shown hold ${(100 * (1 - restShare)).toFixed(1)}%; the other ${rest.length} ops ${(100 * restShare).toFixed(1)}%.`
        : "") +
      ` Right: share by op kind.`;
    const self = this;
    this.timeChart = new Chart(document.getElementById("time-" + this.i), {
      type: "bar",
      data: { labels, datasets: [{ label: this.metric, data: values, backgroundColor: colours }] },
      options: {
        indexAxis: "y",
        scales: {
          x: {
            ticks: { callback: (v) => fmt(v) },
            title: { display: true, text: m.measured ? "latency (ms)" : "MAC (bytes)" },
          },
          y: { ticks: { autoSkip: false, font: { size: 10 } } },
        },
        plugins: {
          legend: { display: false },
          tooltip: {
            callbacks: {
              label: (c) => {
                const k = top[c.dataIndex];
                const L = k === undefined ? null : m.layers[k];
                return (
                  `${fmt(c.raw)} (${((100 * c.raw) / total).toFixed(1)}%)` +
                  (L ? ` · ${L.kind} · ${L.module || "top level"}` : "")
                );
              },
            },
          },
        },
        onClick: (ev, els) => {
          if (els.length && top[els[0].index] !== undefined) self.select(top[els[0].index], false);
        },
      },
    });
  };

  ModelView.prototype.kindShare = function () {
    const m = this.m,
      byKind = new Map(),
      byFamily = new Map();
    m.layers.forEach((L, k) => {
      byKind.set(L.kind, (byKind.get(L.kind) || 0) + this.cost[k]);
      const fam = FAMILY[L.kind] || "other";
      byFamily.set(fam, (byFamily.get(fam) || 0) + this.cost[k]);
    });
    const total = [...byKind.values()].reduce((a, b) => a + b, 0) || 1;
    const kinds = [...byKind.entries()].filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
    const families = [...byFamily.entries()]
      .filter(([, v]) => v > 0)
      .sort((a, b) => b[1] - a[1])
      .map(([f, v]) => `${f} ${((100 * v) / total).toFixed(0)}%`)
      .join(" · ");
    this.kindChart = new Chart(document.getElementById("kind-" + this.i), {
      type: "doughnut",
      data: {
        labels: kinds.map(([k, v]) => `${k} ${((100 * v) / total).toFixed(1)}%`),
        datasets: [{ data: kinds.map(([, v]) => v), backgroundColor: kinds.map(([k]) => colour(k)) }],
      },
      options: {
        plugins: {
          title: { display: true, text: [`share of ${this.metric} by op kind`, families] },
          legend: { position: "bottom" },
          tooltip: { callbacks: { label: (c) => `${c.label}: ${m.measured ? ms(c.raw) : bytes(c.raw)}` } },
        },
      },
    });
  };

  // ------------------------------------------------------------------ layer table
  // Rows drawn at first: laying out a 2,000-row table costs the browser seconds; sorting and
  // filtering still run over every op.
  const ROWS = 250;
  ModelView.prototype.table = function () {
    const m = this.m,
      self = this;
    const cols = [
      ["#", (L, k) => k, "num"],
      ["name", (L) => L.display],
      ["kind", (L) => L.kind],
      ["op", (L) => L.op],
      ["module", (L) => L.module],
      ["output", (L) => shape(L.out), null, (L) => (L.out[0] || []).reduce((a, b) => a * b, 1)],
      ["FLOPs", (L) => L.flops, "num", null, count],
      ["MAC", (L) => L.mac, "num", null, bytes],
      ["params", (L) => L.params, "num", null, count],
      ["latency", (L) => L.lat, "num", null, ms],
      ...(m.layers.some((L) => L.est !== null && L.est !== undefined) // only with a device-spec estimate
        ? [
            ["est. ms", (L) => L.est, "num", null, ms],
            ["bound", (L) => L.bound || ""],
          ]
        : []),
      [
        "intensity",
        (L) => (L.mac > 0 ? (2 * L.flops) / L.mac : null),
        "num",
        null,
        (v) => (v === null ? "—" : v.toPrecision(3)),
      ],
      [
        "efficiency",
        (L) => (L.roof ? L.roof.efficiency : null),
        "num",
        null,
        (v) => (v === null ? "—" : efficiency(v)),
      ],
      ["findings", (L) => L.findings.join(" ")],
    ];
    const table = document.getElementById("table-" + this.i);
    const filter = document.getElementById("filter-" + this.i);
    const counter = document.getElementById("count-" + this.i);
    let sortCol = 0,
      asc = true,
      limit = ROWS;
    function rows() {
      const f = filter.value.trim().toLowerCase();
      let ks = m.layers.map((_, k) => k);
      if (f) {
        const path = ks.filter((k) => {
          const mod = m.layers[k].module.toLowerCase();
          return mod === f || mod.startsWith(f + ".");
        });
        ks = path.length ? path : ks.filter((k) => m.layers[k].module.toLowerCase().includes(f));
      }
      const [, get, , key] = cols[sortCol];
      const val = (k) => {
        const v = (key || get)(m.layers[k], k);
        return v === null || v === undefined ? -Infinity : v;
      };
      ks.sort((a, b) => {
        const x = val(a),
          y = val(b);
        const c = x < y ? -1 : x > y ? 1 : a - b;
        return asc ? c : -c;
      });
      return ks;
    }
    function draw() {
      const all = rows(),
        ks = all.slice(0, limit);
      const head =
        "<thead><tr>" +
        cols
          .map(
            ([n], c) => `<th data-c="${c}" class="${c === sortCol ? (asc ? "asc" : "desc") : ""}">${n}</th>`,
          )
          .join("") +
        "</tr></thead>";
      const body = ks
        .map((k) => {
          const L = m.layers[k];
          return (
            `<tr data-k="${k}" class="${L.findings.length ? "flag" : ""}${k === self.selected ? " sel" : ""}">` +
            cols
              .map(([n, get, cls, , fmt]) => {
                const v = get(L, k);
                const text = fmt ? fmt(v) : v === null || v === undefined ? "—" : String(v);
                const sw =
                  n === "kind" ? `<span class=swatch style="background:${colour(L.kind)}"></span>` : "";
                return `<td${cls ? ` class=${cls}` : ""}>${sw}${esc(text)}</td>`;
              })
              .join("") +
            "</tr>"
          );
        })
        .join("");
      table.innerHTML = head + "<tbody>" + body + "</tbody>";
      counter.innerHTML =
        `${all.length} of ${m.layers.length} ops` +
        (all.length > ks.length
          ? `, showing the first ${ks.length} in this order: <a href="#" data-more=1>show all</a>`
          : "");
    }
    counter.addEventListener("click", (ev) => {
      if (ev.target.dataset.more) {
        ev.preventDefault();
        limit = Infinity;
        draw();
      }
    });
    table.addEventListener("click", (ev) => {
      const th = ev.target.closest("th");
      if (th) {
        const c = +th.dataset.c;
        asc = c === sortCol ? !asc : cols[c][2] !== "num";
        sortCol = c;
        draw();
        return;
      }
      const tr = ev.target.closest("tr[data-k]");
      if (tr) self.select(+tr.dataset.k, false);
    });
    filter.addEventListener("input", () => {
      limit = ROWS;
      draw();
    });
    this.showRow = (k) => {
      // a row past the drawn ones: draw down to it
      const pos = rows().indexOf(k);
      if (pos >= limit) {
        limit = pos + 20;
        draw();
      }
    };
    draw();
  };

  // ------------------------------------------------------------------ graph
  function GraphView(view) {
    this.view = view;
    this.m = view.m;
    this.svg = document.getElementById("graph-" + view.i);
    this.level = this.m.detail;
    this.bar();
    this.draw();
    this.panZoom();
  }

  GraphView.prototype.bar = function () {
    const bar = document.getElementById("graph-bar-" + this.view.i);
    bar.innerHTML =
      this.m.levels
        .map(
          (lv, k) =>
            `<button data-l="${k}">${lv.depth === null ? "every op" : "modules, depth " + lv.depth} (${lv.nodes.length})</button>`,
        )
        .join("") +
      `<button data-fit=1 title="the whole graph in view">fit</button><button data-one=1 title="back to readable size">1:1</button>` +
      `<span class=muted>metric: ${esc(this.view.metric)}</span>`;
    bar.addEventListener("click", (ev) => {
      const b = ev.target.closest("button");
      if (!b) return;
      if (b.dataset.fit) this.fitAll();
      else if (b.dataset.one) this.reset();
      else {
        this.level = +b.dataset.l;
        this.draw();
      }
    });
    document.getElementById("graph-metric-" + this.view.i).textContent = this.view.metric;
  };

  GraphView.prototype.draw = function (focus) {
    const lv = this.m.levels[this.level],
      view = this.view,
      layers = this.m.layers;
    document
      .querySelectorAll(`#graph-bar-${view.i} button`)
      .forEach((b) => b.classList.toggle("on", +b.dataset.l === this.level));
    const W = 150,
      H = 24;
    const info = lv.nodes.map((n) => {
      const ops = n.ops || [n.op];
      const cost = ops.reduce((s, k) => s + view.cost[k], 0);
      const flagged = ops.filter((k) => layers[k].findings.length).length;
      return { n, ops, cost, flagged };
    });
    const max = Math.max(...info.map((d) => d.cost), 1e-12);
    this.where = new Map();
    const edges = lv.edges
      .map(([u, v, p]) => {
        let d = `M${p[0]} ${p[1]}`;
        for (let j = 2; j < p.length; j += 2) {
          const x0 = p[j - 2],
            y0 = p[j - 1],
            x1 = p[j],
            y1 = p[j + 1],
            my = (y0 + y1) / 2;
          d += y1 > y0 ? ` C${x0} ${my} ${x1} ${my} ${x1} ${y1}` : ` L${x1} ${y1}`;
        }
        const back = p[p.length - 1] <= p[1];
        return `<path class="e${back ? " back" : ""}" d="${d}"/>`;
      })
      .join("");
    const nodes = info
      .map((d, j) => {
        d.ops.forEach((k) => this.where.set(k, j));
        const t = Math.sqrt(d.cost / max); // perceptual: small costs still visible
        const fill = `hsl(4, ${Math.round(20 + 70 * t)}%, ${Math.round(97 - 47 * t)}%)`;
        const dark = t > 0.62;
        const group = d.n.group !== undefined;
        const L = group ? null : layers[d.n.op];
        const label = group ? `${d.n.group} ×${d.ops.length}` : `${L.display}`;
        const short = label.length > 21 ? label.slice(0, 20) + "…" : label;
        const tip = group
          ? `${d.n.group}: ${d.ops.length} ops`
          : `${L.display} · ${L.op} · id ${L.name}`;
        const badge = d.flagged
          ? `<circle class=badge cx="${W - 2}" cy="2" r="7"/><text class=badge-t x="${W - 2}" y="5.5" text-anchor="middle">${d.flagged > 9 ? "9+" : d.flagged}</text>`
          : "";
        return (
          `<g class="n${group ? " group" : ""}${d.flagged ? " flag" : ""}" data-j="${j}" transform="translate(${d.n.x - W / 2},${d.n.y - H / 2})">` +
          `<rect width="${W}" height="${H}" fill="${fill}"/>` +
          (group ? "" : `<rect width="4" height="${H}" fill="${colour(L.kind)}" stroke="none"/>`) +
          `<text x="8" y="16" fill="${dark ? "#fff" : "#1d2330"}">${esc(short)}</text>${badge}` +
          `<title>${esc(tip)}\n${esc(view.metric)}: ${view.m.measured ? ms(d.cost) : bytes(d.cost)}` +
          (d.flagged ? `\nfindings on ${d.flagged} op(s)` : "") +
          `</title></g>`
        );
      })
      .join("");
    this.info = info;
    this.svg.innerHTML = `<g class=viewport><g>${edges}</g><g>${nodes}</g></g>`;
    this.size = { w: lv.width, h: lv.height };
    if (focus && focus.length) this.fit(focus);
    else this.reset();
    if (view.selected !== null) this.highlight(view.selected, false);
  };

  GraphView.prototype.reset = function () {
    const box = this.svg.getBoundingClientRect();
    const scale = Math.min(1, Math.max(0.35, (box.width || 800) / (this.size.w + 40)));
    this.vb = { x: -20, y: -10, w: (box.width || 800) / scale, h: (box.height || 640) / scale };
    if (this.size.w * scale < (box.width || 800)) this.vb.x = -((box.width || 800) / scale - this.size.w) / 2;
    this.apply();
  };

  GraphView.prototype.fit = function (ops) {
    const js = [...new Set(ops.map((k) => this.where.get(k)))];
    const lv = this.m.levels[this.level];
    const xs = js.map((j) => lv.nodes[j].x),
      ys = js.map((j) => lv.nodes[j].y);
    const box = this.svg.getBoundingClientRect();
    const aspect = (box.height || 640) / (box.width || 800);
    const w = Math.max(600, Math.max(...xs) - Math.min(...xs) + 300);
    this.vb = {
      x: (Math.max(...xs) + Math.min(...xs)) / 2 - w / 2,
      y: Math.min(...ys) - 40,
      w,
      h: w * aspect,
    };
    this.apply();
  };

  GraphView.prototype.fitAll = function () {
    const box = this.svg.getBoundingClientRect(),
      aspect = (box.height || 640) / (box.width || 800);
    const w = Math.max(this.size.w + 40, (this.size.h + 20) / aspect);
    this.vb = { x: this.size.w / 2 - w / 2, y: -10, w, h: w * aspect };
    this.apply();
  };

  GraphView.prototype.apply = function () {
    this.svg.setAttribute("viewBox", `${this.vb.x} ${this.vb.y} ${this.vb.w} ${this.vb.h}`);
  };

  GraphView.prototype.highlight = function (k, centre) {
    this.svg.querySelectorAll(".n.sel").forEach((g) => g.classList.remove("sel"));
    const j = this.where.get(k);
    if (j === undefined) return;
    const g = this.svg.querySelector(`.n[data-j="${j}"]`);
    if (g) g.classList.add("sel");
    if (centre) {
      const n = this.m.levels[this.level].nodes[j];
      this.vb.x = n.x - this.vb.w / 2;
      this.vb.y = n.y - this.vb.h / 2;
      this.apply();
    }
  };

  GraphView.prototype.panZoom = function () {
    const svg = this.svg;
    let drag = null,
      moved = false;
    const toUnits = () => this.vb.w / (svg.getBoundingClientRect().width || 1);
    svg.addEventListener(
      "wheel",
      (ev) => {
        ev.preventDefault();
        const r = svg.getBoundingClientRect();
        const f = Math.exp(ev.deltaY * 0.0015);
        const w = Math.min(Math.max(this.vb.w * f, 150), Math.max(this.size.w, this.size.h) * 2 + 400);
        const k = w / this.vb.w;
        const px = this.vb.x + ((ev.clientX - r.left) / r.width) * this.vb.w,
          py = this.vb.y + ((ev.clientY - r.top) / r.height) * this.vb.h;
        this.vb = { x: px - (px - this.vb.x) * k, y: py - (py - this.vb.y) * k, w, h: this.vb.h * k };
        this.apply();
      },
      { passive: false },
    );
    svg.addEventListener("pointerdown", (ev) => {
      drag = { x: ev.clientX, y: ev.clientY, vx: this.vb.x, vy: this.vb.y, u: toUnits() };
      moved = false;
    });
    window.addEventListener("pointermove", (ev) => {
      if (!drag) return;
      const dx = ev.clientX - drag.x,
        dy = ev.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) moved = true;
      this.vb.x = drag.vx - dx * drag.u;
      this.vb.y = drag.vy - dy * drag.u;
      this.apply();
    });
    window.addEventListener("pointerup", () => {
      drag = null;
    });
    svg.addEventListener("click", (ev) => {
      if (moved) return;
      const g = ev.target.closest(".n");
      if (!g) return;
      const d = this.info[+g.dataset.j];
      if (d.n.group !== undefined && this.level < this.m.levels.length - 1) {
        this.level += 1; // open the module one level down, centred on its ops
        this.draw(d.ops);
      } else if (d.n.op !== undefined) {
        this.view.select(d.n.op, false);
      }
    });
  };

  // Everything above is defined; draw every model, then tell whoever waits (the tests) we are done.
  DATA.models.forEach((m, i) => new ModelView(m, i));
  window.__archlint = { ready: true, startMs: t0, renderMs: performance.now() - t0 };
  document.body.setAttribute("data-ready", "1");
})();
