"""`archlint trace`: torch.profiler traces of real GPU runs → figures and priced findings.

Layers, each importing only the ones above it (none imports torch):
    scan       stream a Chrome trace's events with bounded memory (stdlib JSON decoder, chunked)
    read       keep what the analysis needs, as columns (TraceData)
    kernels    what a GPU event is, from its name (HTA kind, group, tensor cores)
    intervals  interval arithmetic
    analyze    pure functions: the temporal breakdown as HTA defines it, per-step figures (TraceAnalysis)
    findings   one priced Diagnostic;  checks/  one module per rule (AL501-AL509)
    diff, link comparing two traces; merging with the code linter's findings
    command    the `archlint trace` subcommand
"""
