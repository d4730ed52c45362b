"""`ptc coverage`: every instruction form each target's lowering can produce, and the case of
the coverage catalogue (ptc.coverage) that exercises it on the CPU emulator against the
reference interpreter (docs/testing.md)."""
from __future__ import annotations

import json

import click

from .common import cli, fail


@cli.command(epilog="""\b
Examples:
  ptc coverage
  ptc coverage --target sm90 --missing
  ptc coverage --lower-only --json""")
@click.option("--target", "-t", "targets", multiple=True, metavar="TARGET",
              help="Only this target (repeatable); every target with a renderer by default.")
@click.option("--lower-only", is_flag=True,
              help="Lower the cases and read their forms, without building or running them "
                   "(no compiler, seconds): a form is then covered by a case that produces "
                   "it, not one that was seen to match the interpreter.")
@click.option("--missing", is_flag=True,
              help="List only the reachable forms no passing case covers.")
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
def coverage(targets, lower_only, missing, as_json):
    """Print the coverage table: per target, each instruction form the lowering can choose
    (wgmma widths and operand layouts, ldmatrix, mma.sync and MFMA atoms, TMA boxes, copy
    and store widths, ...), the case that covers it (kernel, tiles, plan) and whether that
    case matches the interpreter; and the forms the lowering never produces, with why.
    Exits 1 when a reachable form is covered by no case that passed."""
    from ..coverage.cases import CATALOGUE, coverage as table, lowered_result, run_catalogue
    from ..devices import builtin_targets, get_device
    from ..render import capabilities

    known = [t for t in builtin_targets() if capabilities(get_device(t)) is not None]
    for t in targets:
        if t not in known:
            raise click.BadParameter(f"{t!r} is not a target with a renderer "
                                     f"({', '.join(known)})", param_hint="'--target'")
    chosen = list(dict.fromkeys(targets)) or known
    cases = [c for c in CATALOGUE if c.target in chosen]

    def log(line: str) -> None:
        click.echo(line, err=True)

    results = [lowered_result(c) for c in cases] if lower_only else run_catalogue(cases, log)
    rows = table(results, chosen)
    if as_json:
        click.echo(json.dumps(_json(rows, results, chosen, lower_only), indent=2))
    else:
        _print(rows, chosen, missing, lower_only)
    gaps = [r for r in rows if r.unreachable is None and not r.covered]
    if gaps:
        raise fail(f"{len(gaps)} reachable form(s) covered by no case that "
                   f"{'lowers' if lower_only else 'passes'}: "
                   + "; ".join(f"{r.form.target} {r.form.describe()}" for r in gaps[:5])
                   + (" ..." if len(gaps) > 5 else ""),
                   hint="add a case that produces it to ptc/coverage/cases.py (CATALOGUE), or "
                        "a rule saying why the lowering never does to "
                        "ptc/coverage/universe.py (UNREACHABLE)")


def _status(row, lower_only: bool) -> str:
    if row.unreachable is not None:
        return "unreachable"
    if row.covered:
        return "lowered" if lower_only else "passes"
    return "FAILS" if row.failed else "uncovered"


def _print(rows, targets, missing: bool, lower_only: bool) -> None:
    """Plain columns, one line per form (wide: meant for a terminal, a pager or grep)."""
    head = ("form", "case", "kernel", "tiles", "plan", "lowered" if lower_only else "matches")
    for target in targets:
        mine = [r for r in rows if r.form.target == target]
        reachable = [r for r in mine if r.unreachable is None]
        covered = [r for r in reachable if r.covered]
        click.echo(f"{target}: {len(covered)} of {len(reachable)} reachable forms covered by a "
                   f"case that {'lowers' if lower_only else 'matches the interpreter'}, "
                   f"{len(mine) - len(reachable)} unreachable")
        lines = [head]
        for r in reachable:
            if missing and r.covered:
                continue
            status = _status(r, lower_only)
            c = (r.passed or r.failed or (None,))[0]
            if c is None:
                lines.append((r.form.describe(), "-", "", "", "", status))
                continue
            lines.append((r.form.describe(), c.name, f"{c.path}:{c.kernel}",
                          " ".join(f"{k}={v}" for k, v in c.tiles) or "-",
                          c.choice.describe(),
                          {"passes": "yes", "lowered": "yes"}.get(status, status)))
        widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
        if len(lines) > 1:
            for line in lines:
                click.echo("  " + "  ".join(x.ljust(w) for x, w in zip(line, widths))
                           + "  " + line[-1])
        if not missing:
            for r in mine:
                if r.unreachable is not None:
                    click.echo(f"  unreachable: {r.form.describe()}: {r.unreachable}")
        click.echo("")


def _json(rows, results, targets, lower_only: bool) -> dict:
    summary = {}
    for target in targets:
        mine = [r for r in rows if r.form.target == target]
        reachable = [r for r in mine if r.unreachable is None]
        summary[target] = {"reachable": len(reachable),
                           "covered": sum(1 for r in reachable if r.covered),
                           "unreachable": len(mine) - len(reachable)}
    return {
        "lower_only": lower_only,
        "targets": summary,
        "forms": [{**r.form.to_json(), "status": _status(r, lower_only),
                   "unreachable": r.unreachable,
                   "cases": [c.name for c in r.passed],
                   "failing_cases": [c.name for c in r.failed]} for r in rows],
        "cases": [{**res.case.to_json(), "passed": res.passed, "problem": res.problem,
                   "seconds": round(res.seconds, 2),
                   "runs": [{"dims": dict(run.dims), "passed": run.passed,
                             "problem": run.problem, "errors": dict(run.errors)}
                            for run in res.runs]} for res in results],
    }
