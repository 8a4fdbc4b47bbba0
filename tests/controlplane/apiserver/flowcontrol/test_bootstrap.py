"""The configuration ensurer over a real (SQLite) store: upstream's objects created once,
mandatory ones always put back, suggested ones kept current only while their
``apf.kubernetes.io/autoupdate-spec`` annotation says so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from controlplane.apiserver.flowcontrol import bootstrap
from controlplane.apiserver.registry.store import ResourceStore
from controlplane.storage.sqlite import SQLiteStore
from kube.api.kinds.flowcontrol_v1 import FlowSchema, PriorityLevelConfiguration
from kube.api.meta_v1 import DeleteOptions
from kube.clock import FakeClock

Stores = tuple[ResourceStore, ResourceStore]


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[Stores]:
    store = await SQLiteStore.open(tmp_path / "db")
    clock = FakeClock()
    try:
        yield (
            ResourceStore(FlowSchema.kind_info, store, clock),
            ResourceStore(PriorityLevelConfiguration.kind_info, store, clock),
        )
    finally:
        await store.close()


async def shares(levels: ResourceStore, name: str) -> int | None:
    level = await levels.get("", name)
    assert isinstance(level, PriorityLevelConfiguration) and level.spec and level.spec.limited
    return level.spec.limited.nominal_concurrency_shares


async def set_shares(
    levels: ResourceStore, name: str, value: int, annotations: dict[str, str] | None
) -> None:
    level = await levels.get("", name)
    assert isinstance(level, PriorityLevelConfiguration) and level.spec and level.spec.limited
    level.spec.limited.nominal_concurrency_shares = value
    level.metadata = msgspec.structs.replace(level.metadata, annotations=annotations)
    await levels.update("", name, level, bootstrap.SYSTEM)


async def test_everything_is_created_annotated_and_a_second_run_changes_nothing(
    stores: Stores,
) -> None:
    schemas, levels = stores
    await bootstrap.ensure(schemas, levels)
    listed = (await schemas.list()).items + (await levels.list()).items
    assert len(listed) == 2 + 2 + 6 + 11
    assert all((o.metadata.annotations or {}).get(bootstrap.AUTOUPDATE) == "true" for o in listed)
    revision = (await levels.list()).metadata.resource_version
    await bootstrap.ensure(schemas, levels)
    assert (await levels.list()).metadata.resource_version == revision


async def test_mandatory_objects_come_back_and_are_always_autoupdated(stores: Stores) -> None:
    schemas, levels = stores
    await bootstrap.ensure(schemas, levels)
    await set_shares(levels, "catch-all", 5, {bootstrap.AUTOUPDATE: "false"})
    await schemas.delete("", "exempt", DeleteOptions(), bootstrap.SYSTEM)
    await levels.delete("", "exempt", DeleteOptions(), bootstrap.SYSTEM)
    await bootstrap.ensure(schemas, levels)
    catch_all = await levels.get("", "catch-all")
    assert (catch_all.metadata.annotations or {})[bootstrap.AUTOUPDATE] == "true"
    assert (await schemas.get("", "exempt")).metadata.name == "exempt"
    assert (await levels.get("", "exempt")).metadata.name == "exempt"


@pytest.mark.parametrize(
    ("annotations", "kept", "annotation_after"),
    [
        pytest.param({bootstrap.AUTOUPDATE: "true"}, False, "true", id="autoupdate-true"),
        pytest.param({bootstrap.AUTOUPDATE: "false"}, True, "false", id="autoupdate-false"),
        pytest.param(None, True, "false", id="no-annotation-edited"),
    ],
)
async def test_suggested_specs_follow_the_annotation(
    stores: Stores, annotations: dict[str, str] | None, kept: bool, annotation_after: str
) -> None:
    schemas, levels = stores
    await bootstrap.ensure(schemas, levels)
    await set_shares(levels, "workload-low", 7, annotations)
    await bootstrap.ensure(schemas, levels)
    assert await shares(levels, "workload-low") == (7 if kept else 100)
    level = await levels.get("", "workload-low")
    assert (level.metadata.annotations or {})[bootstrap.AUTOUPDATE] == annotation_after


def test_mandatory_changed_sees_a_missing_or_edited_object() -> None:
    levels, schemas = list(bootstrap.MANDATORY_LEVELS), list(bootstrap.MANDATORY_SCHEMAS)
    assert not bootstrap.mandatory_changed(levels, schemas)
    assert bootstrap.mandatory_changed(levels[:1], schemas)
    edited = msgspec.json.decode(msgspec.json.encode(schemas[1]), type=FlowSchema)
    assert edited.spec is not None
    edited.spec.matching_precedence = 9999
    assert bootstrap.mandatory_changed(levels, [schemas[0], edited])
