"""Ray generation and volume rendering, hierarchical sampling."""
import torch
import torch.nn.functional as F

DEBUG = False


def get_rays(H, W, focal, c2w):
    i, j = torch.meshgrid(torch.arange(W, device=c2w.device), torch.arange(H, device=c2w.device), indexing="xy")
    dirs = torch.stack([(i - W * 0.5) / focal, -(j - H * 0.5) / focal, -torch.ones_like(i)], -1)
    rays_d = torch.sum(dirs[..., None, :] * c2w[:3, :3], -1)
    return c2w[:3, -1].expand(rays_d.shape), rays_d


def raw2outputs(raw, z_vals, rays_d, white_bkgd=False):
    dists = torch.cat([z_vals[..., 1:] - z_vals[..., :-1], torch.full_like(z_vals[..., :1], 1e10)], -1)
    dists = dists * torch.norm(rays_d[..., None, :], dim=-1)
    alpha = 1.0 - torch.exp(-F.relu(raw[..., 3]) * dists)
    weights = alpha * torch.cumprod(torch.cat([torch.ones_like(alpha[..., :1]), 1.0 - alpha + 1e-10], -1), -1)[..., :-1]
    rgb_map = torch.sum(weights[..., None] * raw[..., :3], -2)
    depth_map = torch.sum(weights * z_vals, -1)
    acc_map = torch.sum(weights, -1)
    disp_map = 1.0 / torch.max(1e-10 * torch.ones_like(depth_map), depth_map / acc_map)
    if white_bkgd:
        rgb_map = rgb_map + (1.0 - acc_map[..., None])
    return rgb_map, disp_map, acc_map, weights


def sample_pdf(bins, weights, n_samples):
    pdf = (weights + 1e-5) / torch.sum(weights + 1e-5, -1, keepdim=True)
    cdf = torch.cat([torch.zeros_like(pdf[..., :1]), torch.cumsum(pdf, -1)], -1)
    u = torch.rand(list(cdf.shape[:-1]) + [n_samples], device=cdf.device)
    inds = torch.searchsorted(cdf, u, right=True)
    below = torch.clamp(inds - 1, min=0)
    above = torch.clamp(inds, max=cdf.shape[-1] - 1)
    cdf_g = torch.stack([torch.gather(cdf, -1, below), torch.gather(cdf, -1, above)], -1)
    bins_g = torch.stack([torch.gather(bins, -1, below), torch.gather(bins, -1, above)], -1)
    denom = torch.where(cdf_g[..., 1] - cdf_g[..., 0] < 1e-5, torch.ones_like(u), cdf_g[..., 1] - cdf_g[..., 0])
    return bins_g[..., 0] + (u - cdf_g[..., 0]) / denom * (bins_g[..., 1] - bins_g[..., 0])


def render_rays(rays_o, rays_d, network_fn, network_fine, N_samples, N_importance, near, far, white_bkgd=False):
    t_vals = torch.linspace(0.0, 1.0, steps=N_samples, device=rays_o.device)
    z_vals = (near * (1.0 - t_vals) + far * t_vals).expand([rays_o.shape[0], N_samples])
    pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
    viewdirs = (rays_d / torch.norm(rays_d, dim=-1, keepdim=True))[:, None].expand(pts.shape)
    raw = network_fn(pts, viewdirs)
    rgb_map, disp_map, acc_map, weights = raw2outputs(raw, z_vals, rays_d, white_bkgd)
    rgb0 = rgb_map

    z_mid = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
    z_samples = sample_pdf(z_mid, weights[..., 1:-1], N_importance).detach()
    z_vals, _ = torch.sort(torch.cat([z_vals, z_samples], -1), -1)
    pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
    viewdirs = (rays_d / torch.norm(rays_d, dim=-1, keepdim=True))[:, None].expand(pts.shape)
    raw = network_fine(pts, viewdirs)
    rgb_map, disp_map, acc_map, _ = raw2outputs(raw, z_vals, rays_d, white_bkgd)

    ret = {"rgb_map": rgb_map, "disp_map": disp_map, "acc_map": acc_map, "rgb0": rgb0}
    for k in ret:
        if (torch.isnan(ret[k]).any() or torch.isinf(ret[k]).any()) and DEBUG:  # label: AL401
            print(f"! [Numerical Error] {k} contains nan or inf.")
    return ret


def render(rays_o, rays_d, chunk=1024 * 32, **kwargs):
    all_ret = {}
    for i in range(0, rays_o.shape[0], chunk):
        ret = render_rays(rays_o[i:i + chunk], rays_d[i:i + chunk], **kwargs)
        for k in ret:
            all_ret.setdefault(k, []).append(ret[k])
    all_ret = {k: torch.cat(all_ret[k], 0) for k in all_ret}
    extras = {k: all_ret[k] for k in all_ret if k not in ("rgb_map", "disp_map", "acc_map")}
    return all_ret["rgb_map"], all_ret["disp_map"], all_ret["acc_map"], extras
