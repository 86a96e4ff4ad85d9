"""`stackproof noise project`: sweep the scenarios, print the table, write JSON, Markdown and a plot.

  stackproof noise project --run reports/acceptance --nodes 1,16,256,4096,65536 --interval 1ms \\
      --collective 'allreduce:{binomial,linear}' --noisy-fraction 1,0.1 --placement random -o out/
  stackproof noise project --signature 10Hz:2.5ms --nodes 1,64,4096

"Effective" slowdown sets what a profile costs against what it saves: a profile that reserves cores
for the system runs the application on fewer cores, so (assuming the application scales within a
node) its time grows by cores_max / cores_profile on top of the noise slowdown.
"""
from __future__ import annotations

import itertools
import json
import re
import sys
import time
from pathlib import Path

from stackproof import files
from stackproof.errors import StackproofError
from stackproof.noise.scale import loggp as lg
from stackproof.noise.scale.collectives import ALGORITHMS
from stackproof.noise.scale.noisemodel import NoiseModelError, from_trace, parse_signature
from stackproof.noise.scale.simulate import PLACEMENTS, Scenario, simulate
from stackproof.noise.scale.sources import load_run

DEFAULT_NODES = "1,16,256,4096,65536"
MAX_NODES = 1 << 20


def register(sub) -> None:
    s = sub.add_parser("project", help="project a node's measured noise to thousands of nodes (BSP + allreduce)",
                       description=__doc__.split("\n\n")[0])
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", help="an FWQ trace, a ReFrame run report, or the acceptance report directory")
    src.add_argument("--signature", help="a synthetic noise signature instead of a run, e.g. 10Hz:2.5ms")
    s.add_argument("--profile", help="comma list of profiles of the run (default: every profile it measured)")
    s.add_argument("--stack", help="the stack whose FWQ traces and latency curve to use (default: the run's first)")
    s.add_argument("--nodes", default=DEFAULT_NODES, help=f"comma list of node counts (default {DEFAULT_NODES})")
    s.add_argument("--interval", default="1ms", help="compute time between collectives, with unit (default 1ms)")
    s.add_argument("--iterations", type=int, default=1000, help="bulk-synchronous iterations (default 1000)")
    s.add_argument("--collective", default="allreduce:binomial",
                   help="allreduce:ALGO[,ALGO] or allreduce:{a,b}; ALGO in " + ", ".join(ALGORITHMS))
    s.add_argument("--noisy-fraction", default="1", help="comma list of shares of noisy nodes (default 1)")
    s.add_argument("--placement", default="random", help="comma list of random, block (default random)")
    s.add_argument("--nonblocking", type=float, default=0.0, metavar="OVERLAP",
                   help="share of the interval overlapped with a non-blocking collective, 0..1 (default 0)")
    s.add_argument("--message-size", type=int, default=8, help="allreduce message size in bytes (default 8)")
    s.add_argument("--loggp", help="override LogGP values, e.g. 'L=1.5,o=0.4,g=0.4,BW=12.5GB/s' (us)")
    s.add_argument("--loggp-from", metavar="FILE", help="fit LogGP from this osu_latency output")
    s.add_argument("--seed", type=int, default=0, help="random phases and placements (default 0)")
    s.add_argument("-o", "--outdir", help="write project.json, project.md and project-slowdown.png here")
    s.add_argument("--json", action="store_true", help="print the results as JSON")
    s.set_defaults(func=cmd_project)


# ------------------------------------------------------------------ arguments

def _int_list(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise StackproofError(f"{what} {text!r}: expected a comma list of integers") from None
    if not values:
        raise StackproofError(f"{what}: empty list")
    for v in values:
        if v < 1 or v > MAX_NODES:
            raise StackproofError(f"{what}: node count {v} out of range 1..{MAX_NODES}")
    return values


def _float_list(text: str, what: str, lo: float, hi: float) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise StackproofError(f"{what} {text!r}: expected a comma list of numbers") from None
    if not values or any(not (lo <= v <= hi) for v in values):
        raise StackproofError(f"{what} {text!r}: every value must be in [{lo:g}, {hi:g}]")
    return values


def _time_us(text: str, what: str) -> float:
    m = re.fullmatch(r"\s*([0-9.]+(?:[eE][-+]?\d+)?)\s*(ns|us|ms|s)\s*", text)
    if not m:
        raise StackproofError(f"{what} {text!r}: expected a time with a unit, e.g. 1ms or 250us")
    value = float(m.group(1)) * {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[m.group(2)]
    if value <= 0:
        raise StackproofError(f"{what} must be positive")
    return value


def parse_collectives(text: str) -> list[str]:
    kind, sep, algos = text.partition(":")
    if kind.strip() != "allreduce" or not sep:
        raise StackproofError(f"--collective {text!r}: expected allreduce:ALGO[,ALGO] (only allreduce is modelled)")
    names = [a.strip() for a in algos.strip().strip("{}").split(",") if a.strip()]
    bad = [a for a in names if a not in ALGORITHMS]
    if bad or not names:
        raise StackproofError(f"--collective: unknown algorithm {', '.join(bad) or '(none)'}; "
                              f"choose from {', '.join(ALGORITHMS)}")
    return names


def _placements(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in names if p not in PLACEMENTS]
    if bad or not names:
        raise StackproofError(f"--placement: unknown {', '.join(bad) or '(none)'}; choose from {', '.join(PLACEMENTS)}")
    return names


def _parse_output(kind: str, path: Path):
    """A benchmark's output file in a job's output directory, read through stackproof.files."""
    from stackproof.benchparse import PARSERS
    try:
        text = files.read_in(path.parent, path.name).decode(errors="replace")
    except (OSError, files.UnsafePath) as exc:
        raise StackproofError(f"{path}: cannot read benchmark output ({exc})") from None
    return PARSERS[kind](text, str(path))


def _loggp(loggp: str | None, loggp_from: str | None, curves) -> lg.LogGP:
    from stackproof.benchparse import parse_file
    params = lg.LogGP()
    candidates = [("osu", Path(loggp_from))] if loggp_from else list(curves)
    for kind, path in candidates:
        try:
            if kind != "osu":       # sources.load_run collects OSU curves only (NetPIPE has no benchparse kind)
                raise StackproofError(f"no parser for a {kind} curve")
            result = parse_file("osu", path) if loggp_from else _parse_output("osu", path)
            values = result.values()
            if result.metric == "latency":
                params = lg.fit(list(values), list(values.values()), f"osu_latency {path}")
            else:
                params = lg.from_bandwidth(list(values), list(values.values()), f"osu bandwidth {path}")
            break
        except StackproofError as exc:
            if loggp_from:
                raise
            print(f"noise project: skipping {path}: {exc}", file=sys.stderr)
    if loggp:
        params = lg.override(params, loggp)
    return params


def _noises(run: str | None, signature: str | None, stack: str | None, profiles: list[str] | None):
    if signature:
        return {signature: (parse_signature(signature), None)}, []
    from stackproof.noise.trace import load_in
    found = load_run(run, stack)
    wanted = profiles or list(found.traces)
    missing = [p for p in wanted if p not in found.traces]
    if missing:
        raise StackproofError(f"{found.origin}: no FWQ trace for profile {', '.join(missing)}; "
                              f"measured: {', '.join(found.traces)}")
    out = {}
    for p in wanted:
        # a job's output directory (sources.load_run resolved the user's own path): stackproof.files
        trace = load_in(found.traces[p].parent, found.traces[p].name)
        out[p] = (from_trace(trace), trace.nranks)
    return out, found.curves


# ------------------------------------------------------------------ run

def sweep(noises: dict, params: lg.LogGP, scenarios: list[Scenario], progress=None) -> list[dict]:
    rows = []
    max_cores = max((cores for _, cores in noises.values() if cores), default=None)
    total = len(noises) * len(scenarios)
    for i, ((profile, (noise, cores)), sc) in enumerate(itertools.product(noises.items(), scenarios), 1):
        t0 = time.monotonic()
        out = simulate(sc, noise, params)
        row = {"profile": profile, "app_cores": cores, **out.as_dict()}
        row["effective_slowdown"] = ((1 + out.slowdown) * max_cores / cores - 1) if cores and max_cores else None
        rows.append(row)
        if progress:
            progress(f"[{i}/{total}] {profile}: {sc.nodes} nodes, {sc.collective}, noisy {sc.noisy_fraction:g} "
                     f"{sc.placement}: slowdown {100 * out.slowdown:.2f} % ({time.monotonic() - t0:.1f} s)")
    return rows


def project(*, run: str | None = None, signature: str | None = None, stack: str | None = None,
            profiles: list[str] | None = None, nodes: list[int], interval_us: float = 1000.0,
            iterations: int = 1000, collectives: list[str] = ("binomial",), fractions: list[float] = (1.0,),
            placements: list[str] = ("random",), overlap: float = 0.0, message_bytes: int = 8,
            loggp: str | None = None, loggp_from: str | None = None, seed: int = 0, progress=None) -> dict:
    """The projection of `run`'s FWQ traces (or of a synthetic `signature`) to `nodes` nodes: the
    document `stackproof noise project` prints and writes (write_outputs). StackproofError, one line,
    for bad values or a run it cannot use."""
    if not 0 <= overlap < 1:
        raise StackproofError("--nonblocking OVERLAP must be in [0, 1)")
    if iterations < 1:
        raise StackproofError("--iterations must be >= 1")
    if message_bytes < 0:
        raise StackproofError("--message-size must be >= 0")
    try:
        noises, curves = _noises(run, signature, stack, profiles)
        params = _loggp(loggp, loggp_from, curves)
        scenarios = [Scenario(nodes=n, collective=c, noisy_fraction=f, placement=p, overlap=overlap,
                              interval_us=interval_us, iterations=iterations, message_bytes=message_bytes,
                              seed=seed)
                     for c, f, p, n in itertools.product(collectives, fractions, placements, nodes)]
        rows = sweep(noises, params, scenarios, progress=progress)
    except (NoiseModelError, lg.LogGPError) as exc:
        raise StackproofError(str(exc)) from None
    return {"source": run or signature, "loggp": params.as_dict(),
            "noise": {p: {"fraction": n.fraction, "span_us": n.span_us, "detours": int(n.starts_us.size),
                          "app_cores": cores} for p, (n, cores) in noises.items()},
            "rows": rows}


def write_outputs(doc: dict, out: Path) -> None:
    """project.json, project.md and project-slowdown.png in `out`."""
    from stackproof.noise.scale.render import markdown, plot
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "project.json").write_text(json.dumps(doc, indent=1) + "\n")
        (out / "project.md").write_text(markdown(doc))
        plot(doc, out / "project-slowdown.png")
    except OSError as exc:
        raise StackproofError(f"-o {out}: cannot write ({exc.strerror})") from None


def cmd_project(args) -> int:
    doc = project(run=args.run, signature=args.signature, stack=args.stack,
                  profiles=[p.strip() for p in args.profile.split(",")] if args.profile else None,
                  nodes=_int_list(args.nodes, "--nodes"), interval_us=_time_us(args.interval, "--interval"),
                  iterations=args.iterations, collectives=parse_collectives(args.collective),
                  fractions=_float_list(args.noisy_fraction, "--noisy-fraction", 0.0, 1.0),
                  placements=_placements(args.placement), overlap=args.nonblocking,
                  message_bytes=args.message_size, loggp=args.loggp, loggp_from=args.loggp_from, seed=args.seed,
                  progress=lambda m: print(m, file=sys.stderr, flush=True))
    if args.outdir:
        write_outputs(doc, Path(args.outdir))
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
    else:
        from stackproof.noise.scale.render import markdown
        print(markdown(doc), end="")
    return 0
