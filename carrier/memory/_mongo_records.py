"""Agents, rooms, entities, participants, room states and settings in the MongoDB store.

The records around the memories, one collection each, referencing each other by id only (as in
the SQLite store: a memory may be written before its room). Deleting an agent removes what it
owns collection by collection (not in a transaction: a standalone server has none; a failure
part-way leaves the agent in place, so deleting again finishes the job).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from typing import Any

from bson import ObjectId
from pymongo.errors import DuplicateKeyError

from carrier.errors import StoreError
from carrier.memory import _mongo_codec as codec
from carrier.memory._entities import entity_filters, named
from carrier.memory._mongo_changes import MongoChanges
from carrier.memory._mongo_conn import STORE
from carrier.types import AgentRecord, Entity, Room, RoomState

__all__ = ["Records"]

_MERGE_ATTEMPTS = 20
"""How often saving an entity reads and merges its names again when another write got in first."""


class Records(MongoChanges):
    """The Store's methods for everything but memories (a part of
    :class:`~carrier.memory.mongo.MongoStore`)."""

    # -- agents ----------------------------------------------------------------------------
    async def upsert_agent(self, agent: AgentRecord) -> None:
        """Insert or replace; the first ``created_at`` is kept."""
        col = self._col("agents")
        with self._errors(f"saving agent {agent.id}"):
            await col.update_one({"_id": agent.id}, codec.agent_update(agent), upsert=True)

    async def get_agent(self, agent_id: str) -> AgentRecord | None:
        doc = await self._find_one(f"reading agent {agent_id}", "agents", {"_id": agent_id})
        return codec.agent_from_doc(doc) if doc is not None else None

    async def list_agents(self) -> list[AgentRecord]:
        docs = await self._find(
            "listing agents", "agents", {}, sort=[("created_us", 1), ("_id", 1)]
        )
        return [codec.agent_from_doc(doc) for doc in docs]

    async def delete_agent(self, agent_id: str) -> bool:
        owned = {"agent_id": agent_id}
        with self._errors(f"deleting agent {agent_id}"):
            rooms = await self._col("rooms").find(owned, {"_id": 1}).to_list()
            entities = await self._col("entities").find(owned, {"_id": 1}).to_list()
            await self._col("participants").delete_many(
                {
                    "$or": [
                        {"room_id": {"$in": [d["_id"] for d in rooms]}},
                        {"entity_id": {"$in": [d["_id"] for d in entities]}},
                    ]
                }
            )
            for name in ("room_states", "memories", "rooms", "entities"):
                await self._col(name).delete_many(owned)
            # Last, so that a failure above leaves the agent to delete again.
            result = await self._col("agents").delete_one({"_id": agent_id})
        if self.vectors is not None:
            self.vectors.drop_agent(agent_id)
        await self._log_change(agent_id, dropped=True)
        return result.deleted_count > 0

    # -- rooms, entities, participants -----------------------------------------------------
    async def upsert_room(self, room: Room) -> None:
        col = self._col("rooms")
        with self._errors(f"saving room {room.id}"):
            await col.replace_one({"_id": room.id}, codec.room_doc(room), upsert=True)

    async def get_room(self, room_id: str) -> Room | None:
        doc = await self._find_one(f"reading room {room_id}", "rooms", {"_id": room_id})
        return codec.room_from_doc(doc) if doc is not None else None

    async def get_rooms(self, room_ids: Sequence[str]) -> dict[str, Room]:
        ids = list(dict.fromkeys(room_ids))
        docs = await self._find(f"reading {len(ids)} rooms", "rooms", {"_id": {"$in": ids}})
        return {doc["_id"]: codec.room_from_doc(doc) for doc in docs}

    async def upsert_entity(self, entity: Entity) -> None:
        # Read, merge the names, write back only if nobody wrote in between (a revision
        # counter), else retry: concurrent sightings of one person never lose a name.
        col = self._col("entities")
        with self._errors(f"saving entity {entity.id}"):
            for _ in range(_MERGE_ATTEMPTS):
                stored = await col.find_one({"_id": entity.id})
                if stored is None:
                    names = list(dict.fromkeys(entity.names))
                    doc = codec.entity_doc(entity.model_copy(update={"names": names}), 1)
                    try:
                        await col.insert_one(doc)
                    except DuplicateKeyError:
                        continue
                    return
                known = list(stored.get("names") or [])
                merged = known + [n for n in dict.fromkeys(entity.names) if n not in known]
                revision = stored.get(codec.ENTITY_REVISION, 0)
                doc = codec.entity_doc(entity.model_copy(update={"names": merged}), revision + 1)
                result = await col.replace_one(
                    {"_id": entity.id, codec.ENTITY_REVISION: stored.get(codec.ENTITY_REVISION)},
                    doc,
                )
                if result.matched_count:
                    return
        raise StoreError(
            f"{STORE} {self._mongo.where}: saving entity {entity.id} failed: it kept changing "
            f"under {_MERGE_ATTEMPTS} attempts to merge its names"
        )

    async def get_entity(self, entity_id: str) -> Entity | None:
        doc = await self._find_one(f"reading entity {entity_id}", "entities", {"_id": entity_id})
        return codec.entity_from_doc(doc) if doc is not None else None

    async def find_entities(
        self,
        *,
        agent_id: str,
        platform: str | None = None,
        platform_id: str | None = None,
        name: str | None = None,
    ) -> list[Entity]:
        query = entity_filters(agent_id, platform, platform_id)
        docs = await self._find(
            f"finding entities of agent {agent_id}", "entities", query, sort=[("_id", 1)]
        )
        return named(map(codec.entity_from_doc, docs), name)

    async def delete_entity(self, entity_id: str) -> bool:
        with self._errors(f"deleting entity {entity_id}"):
            # Memberships first: a failure in between leaves a record without rooms, not rooms
            # of a record that is gone.
            await self._col("participants").delete_many({"entity_id": entity_id})
            result = await self._col("entities").delete_one({"_id": entity_id})
        return result.deleted_count > 0

    async def add_participant(self, room_id: str, entity_id: str) -> None:
        col = self._col("participants")
        # A concurrent add of the same pair may win the race: it is recorded once either way.
        with (
            self._errors(f"adding entity {entity_id} to room {room_id}"),
            suppress(DuplicateKeyError),
        ):
            await col.update_one(
                {"room_id": room_id, "entity_id": entity_id},
                {"$setOnInsert": {"seq": ObjectId()}},
                upsert=True,
            )

    async def list_participants(self, room_id: str) -> list[str]:
        docs = await self._find(
            f"listing participants of room {room_id}",
            "participants",
            {"room_id": room_id},
            {"entity_id": 1, "_id": 0},
            sort=[("seq", 1)],
        )
        return [doc["entity_id"] for doc in docs]

    async def get_room_state(self, agent_id: str, room_id: str) -> RoomState | None:
        doc = await self._find_one(
            f"reading the state of room {room_id}",
            "room_states",
            {"agent_id": agent_id, "room_id": room_id},
        )
        return RoomState(doc["state"]) if doc is not None else None

    async def set_room_state(self, agent_id: str, room_id: str, state: RoomState | None) -> None:
        col = self._col("room_states")
        key = {"agent_id": agent_id, "room_id": room_id}
        with self._errors(f"setting the state of room {room_id}"):
            if state is None:
                await col.delete_one(key)
                return
            try:
                await col.update_one(key, {"$set": {"state": str(state)}}, upsert=True)
            except DuplicateKeyError:  # a concurrent upsert inserted it first: update it
                await col.update_one(key, {"$set": {"state": str(state)}})

    # -- settings --------------------------------------------------------------------------
    async def get_setting(self, key: str) -> Any | None:
        doc = await self._find_one(f"reading setting {key!r}", "settings", {"_id": key})
        return doc.get("value") if doc is not None else None

    async def set_setting(self, key: str, value: Any) -> None:
        col = self._col("settings")
        stored = codec.json_value(value)
        with self._errors(f"saving setting {key!r}"):
            # $set, not a replacement: some compatible servers lose a string _id on replace+upsert.
            await col.update_one({"_id": key}, {"$set": {"value": stored}}, upsert=True)
