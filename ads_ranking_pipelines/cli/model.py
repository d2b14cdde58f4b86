"""``ads-ranking model``: the model registry the assets use — versions, champion, history.

``list`` and ``show`` read; ``promote`` and ``rollback`` change the champion and record who
(``--by``, default the OS user), why (``--reason``) and when. Unknown, half-written or corrupt
versions are refused (exit 2) and the champion is left as it was.
"""

from __future__ import annotations

import getpass
import os
from typing import Any, Optional

import typer

from ads_ranking_pipelines.cli import render
from ads_ranking_pipelines.cli.common import EXIT_INVALID, fail
from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry, RegistryError

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Model versions, the champion and its history (ADS_RANKING_HOME).")

_MODEL = typer.Option(TrainingParams().model_name, "--model-name", "-m", help="Model name.")
_OUTPUT = typer.Option(render.TableOutput.table, "--output", "-o", help="table or json")


def _registry(model_name: str) -> ModelRegistry:
    return ModelRegistry(StorageLayout(Settings.from_environ(os.environ).home), model_name)


def _guard(fn, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except RegistryError as exc:
        fail(str(exc), EXIT_INVALID)


def _row(reg: ModelRegistry, version: str, champion: Optional[str]) -> dict[str, Any]:
    m = _guard(reg.manifest, version) if version == champion else _manifest_or_none(reg, version)
    evals = reg.evaluations(version)
    last = evals[-1] if evals else {}
    return {"version": version, "champion": version == champion,
            "train_days": (m or {}).get("train_days"), "created_at": (m or {}).get("created_at"),
            "code_version": (m or {}).get("code_version"),
            "eval_day": last.get("eval_day"), "auc": (last.get("metrics") or {}).get("auc"),
            "gates_passed": last.get("passed"), "intact": m is not None}


def _manifest_or_none(reg: ModelRegistry, version: str) -> Optional[dict[str, Any]]:
    try:
        return reg.manifest(version)
    except RegistryError:
        return None


@app.command("list")
def list_versions(model_name: str = _MODEL, output: render.TableOutput = _OUTPUT) -> None:
    """Every complete version, oldest first, with its held-out AUC and gate verdict."""
    reg = _registry(model_name)
    champion = _guard(reg.champion_version)
    rows = [_row(reg, v, champion) for v in reg.versions()]
    if output is render.TableOutput.json:
        render.echo(render.dump({"model_name": model_name, "champion": champion, "versions": rows}, "json"))
        return
    render.stdout().print(render.table(None, ["VERSION", "CHAMPION", "TRAIN DAYS", "EVAL DAY", "AUC", "GATES", "INTACT"], [
        [r["version"], "*" if r["champion"] else "", _days(r["train_days"]), r["eval_day"] or "-",
         f"{r['auc']:.4f}" if isinstance(r["auc"], float) else "-",
         {True: "passed", False: "failed", None: "-"}[r["gates_passed"]], "yes" if r["intact"] else "CORRUPT"]
        for r in rows]))


def _days(days: Optional[list[str]]) -> str:
    return f"{days[0]}..{days[-1]}" if days else "-"


@app.command("show")
def show(version: str = typer.Argument(..., help="A version, or 'champion'."), model_name: str = _MODEL,
         output: render.TableOutput = _OUTPUT) -> None:
    """One version: manifest (data window, params, code version, cluster), evaluations; or the champion and its history."""
    reg = _registry(model_name)
    if version == "champion":
        doc = _guard(reg.champion) or fail(f"{model_name} has no champion yet", EXIT_INVALID)
        return _print(doc, output)
    manifest = _guard(reg.manifest, version)
    doc = {"model_name": model_name, "version": version, "champion": version == _guard(reg.champion_version),
           "uri": reg.version_uri(version), "manifest": manifest, "evaluations": reg.evaluations(version)}
    _print(doc, output)


def _print(doc: dict[str, Any], output: render.TableOutput) -> None:
    render.echo(render.dump(doc, "json" if output is render.TableOutput.json else "yaml"))


@app.command("promote")
def promote(version: str = typer.Argument(...), reason: str = typer.Option(..., "--reason", help="Why (recorded)."),
            by: Optional[str] = typer.Option(None, "--by", help="Who (recorded); default: the OS user."),
            model_name: str = _MODEL, output: render.TableOutput = _OUTPUT) -> None:
    """Make VERSION the champion (refuses unknown, half-written or corrupt versions)."""
    if not reason.strip():
        fail("invalid --reason='': say why (it is recorded in the champion history)", EXIT_INVALID)
    doc = _guard(_registry(model_name).promote, version, reason=reason, by=by or getpass.getuser())
    _changed(doc, output)


@app.command("rollback")
def rollback(reason: str = typer.Option("", "--reason", help="Why (recorded)."),
             by: Optional[str] = typer.Option(None, "--by", help="Who (recorded); default: the OS user."),
             model_name: str = _MODEL, output: render.TableOutput = _OUTPUT) -> None:
    """Make the previous champion current again."""
    doc = _guard(_registry(model_name).rollback, reason=reason, by=by or getpass.getuser())
    _changed(doc, output)


@app.command("history")
def history(model_name: str = _MODEL, output: render.TableOutput = _OUTPUT) -> None:
    """Every promotion and rollback: who, why, when."""
    events = _guard(_registry(model_name).history)
    if output is render.TableOutput.json:
        render.echo(render.dump({"model_name": model_name, "events": events}, "json"))
        return
    render.stdout().print(render.table(None, ["WHEN", "ACTION", "VERSION", "FROM", "BY", "REASON"], [
        [e["at"], e["action"], e["model_version"], e.get("from_version") or "-", e["by"], e["reason"]] for e in events]))


def _changed(doc: dict[str, Any], output: render.TableOutput) -> None:
    event = doc["events"][-1]
    _report_to_dagster(doc)
    if output is render.TableOutput.json:
        render.echo(render.dump(event, "json"))
        return
    render.echo(f"{doc['model_name']} champion: {event.get('from_version') or 'none'} -> {event['model_version']} "
                f"({event['action']} by {event['by']}: {event['reason']})")


def _report_to_dagster(doc: dict[str, Any]) -> None:
    """The change also lands in the Dagster instance (DAGSTER_HOME, when set) as a materialization
    of ``model_champion``, so the UI's champion history includes changes made here."""
    if not os.environ.get("DAGSTER_HOME"):
        return
    import dagster as dg

    from ads_ranking_pipelines.definitions import champion_changed

    with dg.DagsterInstance.get() as instance:
        instance.report_runless_asset_event(champion_changed(doc))
