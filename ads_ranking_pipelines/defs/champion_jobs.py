"""Promote or roll back the champion from the Dagster UI (the same registry as the CLI and the assets)."""

import dagster as dg
from pydantic import Field

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.defs.champion_asset import champion_changed
from ads_ranking_pipelines.defs.resources import StorageResource
from ads_ranking_pipelines.defs.tags import MODEL_TAG
from ads_ranking_pipelines.storage.registry import ModelRegistry, RegistryError

_MODEL = TrainingParams().model_name


class PromoteConfig(dg.Config):
    model_name: str = Field(_MODEL, description="Model whose champion changes.")
    version: str = Field(description="A complete, intact model version (`ads-ranking model list`).")
    reason: str = Field(description="Why: recorded in the champion history.")


class RollbackConfig(dg.Config):
    model_name: str = Field(_MODEL, description="Model whose champion changes.")
    reason: str = Field(description="Why: recorded in the champion history.")


def _who(context: dg.OpExecutionContext) -> str:
    user = context.run.tags.get("dagster/user")
    return f"{user} (dagster run {context.run.run_id})" if user else f"dagster run {context.run.run_id}"


def _apply(context: dg.OpExecutionContext, registry: ModelRegistry, change) -> dict:
    before = registry.champion_version()
    try:
        doc = change()
    except RegistryError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from None
    context.log.info(f"{registry.model_name} champion: {before or 'none'} -> {doc['model_version']} ({doc['reason']})")
    context.log_event(champion_changed(doc))
    context.add_output_metadata({"from_version": before or "none", "champion": doc["model_version"],
                                 "reason": doc["reason"], "by": doc["by"]})
    return doc


@dg.op(description="Make a version the champion (refuses unknown, half-written or corrupt versions).")
def promote_version(context: dg.OpExecutionContext, config: PromoteConfig, storage: StorageResource) -> dict:
    registry = ModelRegistry(storage.layout(), config.model_name)
    return _apply(context, registry, lambda: registry.promote(config.version, reason=config.reason, by=_who(context)))


@dg.op(description="Make the previous champion current again.")
def rollback_champion(context: dg.OpExecutionContext, config: RollbackConfig, storage: StorageResource) -> dict:
    registry = ModelRegistry(storage.layout(), config.model_name)
    return _apply(context, registry, lambda: registry.rollback(reason=config.reason, by=_who(context)))


@dg.job(description="Promote a model version to champion, with a reason (recorded with who and when).",
        tags={MODEL_TAG: _MODEL})
def promote_model():
    promote_version()


@dg.job(description="Roll the champion back to the previous one, with a reason (recorded with who and when).",
        tags={MODEL_TAG: _MODEL})
def rollback_model():
    rollback_champion()
