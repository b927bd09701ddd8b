"""Agents, rooms, entities, participants, room states and settings in the SQLite store.

The records around the memories: each kept as JSON beside the columns it is looked up by
(rooms and entities by agent; participants by room and by entity). Nothing is declared as a
foreign key (see :mod:`carrier.memory.sqlite`): deleting an agent removes what it owns here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from carrier.memory import _sqlite_codec as codec
from carrier.memory._entities import entity_filters, named
from carrier.memory._sqlite_conn import SQLiteConnection
from carrier.memory.index import VectorIndex
from carrier.types import AgentRecord, Entity, Room, RoomState, to_us

__all__ = ["Records"]


class Records(SQLiteConnection):
    """The Store's methods for everything but memories (a part of
    :class:`~carrier.memory.sqlite.SQLiteStore`)."""

    vectors: VectorIndex | None
    """The store's in-memory vector index (an agent deleted leaves it too)."""

    # -- agents ----------------------------------------------------------------------------
    async def upsert_agent(self, agent: AgentRecord) -> None:
        """Insert or replace; the first ``created_at`` is kept."""
        data = agent.model_dump(mode="json")
        await self._write(
            f"saving agent {agent.id}",
            """INSERT INTO agents (id, name, character, status, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (id) DO UPDATE SET name = excluded.name, character = excluded.character,
                status = excluded.status, updated_at = excluded.updated_at""",
            (
                agent.id,
                agent.name,
                json.dumps(data["character"]),
                agent.status,
                to_us(agent.created_at),
                to_us(agent.updated_at),
            ),
        )

    async def get_agent(self, agent_id: str) -> AgentRecord | None:
        row = await self._fetch_one(
            f"reading agent {agent_id}", "SELECT * FROM agents WHERE id = ?", (agent_id,)
        )
        return codec.agent_from_row(row) if row is not None else None

    async def list_agents(self) -> list[AgentRecord]:
        rows = await self._fetch("listing agents", "SELECT * FROM agents ORDER BY created_at, id")
        return [codec.agent_from_row(row) for row in rows]

    async def delete_agent(self, agent_id: str) -> bool:
        async with self._transaction(f"deleting agent {agent_id}") as db:
            await db.execute(
                """DELETE FROM participants
                WHERE room_id IN (SELECT id FROM rooms WHERE agent_id = ?)
                   OR entity_id IN (SELECT id FROM entities WHERE agent_id = ?)""",
                (agent_id, agent_id),
            )
            for table in ("room_states", "memories", "rooms", "entities"):
                await db.execute(f"DELETE FROM {table} WHERE agent_id = ?", (agent_id,))
            async with db.execute("DELETE FROM agents WHERE id = ?", (agent_id,)) as cursor:
                existed = cursor.rowcount > 0
        if self.vectors is not None:
            self.vectors.drop_agent(agent_id)
        return existed

    # -- rooms, entities, participants -----------------------------------------------------
    async def upsert_room(self, room: Room) -> None:
        await self._write(
            f"saving room {room.id}",
            """INSERT INTO rooms (id, agent_id, platform, platform_id, data) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (id) DO UPDATE SET agent_id = excluded.agent_id,
                platform = excluded.platform, platform_id = excluded.platform_id,
                data = excluded.data""",
            (room.id, room.agent_id, room.platform, room.platform_id, room.model_dump_json()),
        )

    async def get_room(self, room_id: str) -> Room | None:
        # Reads by primary key: at once, on the event loop's thread (``_fetch_near``).
        rows = await self._fetch_near(
            f"reading room {room_id}", "SELECT data FROM rooms WHERE id = ?", (room_id,)
        )
        return Room.model_validate_json(rows[0]["data"]) if rows else None

    async def get_rooms(self, room_ids: Sequence[str]) -> dict[str, Room]:
        rows = await (self._fetch_near if len(room_ids) <= 64 else self._fetch)(
            f"reading {len(room_ids)} rooms",
            "SELECT id, data FROM rooms WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(room_ids)),),
        )
        return {row["id"]: Room.model_validate_json(row["data"]) for row in rows}

    async def upsert_entity(self, entity: Entity) -> None:
        async with self._transaction(f"saving entity {entity.id}") as db:
            async with db.execute("SELECT data FROM entities WHERE id = ?", (entity.id,)) as cursor:
                row = await cursor.fetchone()
            if row is not None:
                known = Entity.model_validate_json(row["data"]).names
                merged = known + [n for n in dict.fromkeys(entity.names) if n not in known]
                entity = entity.model_copy(update={"names": merged})
            await db.execute(
                """INSERT OR REPLACE INTO entities (id, agent_id, platform, platform_id, data)
                VALUES (?, ?, ?, ?, ?)""",
                (
                    entity.id,
                    entity.agent_id,
                    entity.platform,
                    entity.platform_id,
                    entity.model_dump_json(),
                ),
            )

    async def get_entity(self, entity_id: str) -> Entity | None:
        rows = await self._fetch_near(
            f"reading entity {entity_id}", "SELECT data FROM entities WHERE id = ?", (entity_id,)
        )
        return Entity.model_validate_json(rows[0]["data"]) if rows else None

    async def find_entities(
        self,
        *,
        agent_id: str,
        platform: str | None = None,
        platform_id: str | None = None,
        name: str | None = None,
    ) -> list[Entity]:
        fields = entity_filters(agent_id, platform, platform_id)
        where = " AND ".join(f"{column} = ?" for column in fields)
        rows = await self._fetch(
            f"finding entities of agent {agent_id}",
            f"SELECT data FROM entities WHERE {where} ORDER BY id",
            list(fields.values()),
        )
        return named((Entity.model_validate_json(row["data"]) for row in rows), name)

    async def delete_entity(self, entity_id: str) -> bool:
        async with self._transaction(f"deleting entity {entity_id}") as db:
            await db.execute("DELETE FROM participants WHERE entity_id = ?", (entity_id,))
            async with db.execute("DELETE FROM entities WHERE id = ?", (entity_id,)) as cursor:
                return cursor.rowcount > 0

    async def add_participant(self, room_id: str, entity_id: str) -> None:
        await self._write(
            f"adding entity {entity_id} to room {room_id}",
            "INSERT OR IGNORE INTO participants (room_id, entity_id) VALUES (?, ?)",
            (room_id, entity_id),
        )

    async def list_participants(self, room_id: str) -> list[str]:
        rows = await self._fetch(
            f"listing participants of room {room_id}",
            "SELECT entity_id FROM participants WHERE room_id = ? ORDER BY rowid",
            (room_id,),
        )
        return [row["entity_id"] for row in rows]

    async def get_room_state(self, agent_id: str, room_id: str) -> RoomState | None:
        row = await self._fetch_one(
            f"reading the state of room {room_id}",
            "SELECT state FROM room_states WHERE agent_id = ? AND room_id = ?",
            (agent_id, room_id),
        )
        return RoomState(row["state"]) if row is not None else None

    async def set_room_state(self, agent_id: str, room_id: str, state: RoomState | None) -> None:
        what = f"setting the state of room {room_id}"
        if state is None:
            sql = "DELETE FROM room_states WHERE agent_id = ? AND room_id = ?"
            await self._write(what, sql, (agent_id, room_id))
        else:
            sql = "INSERT OR REPLACE INTO room_states (agent_id, room_id, state) VALUES (?, ?, ?)"
            await self._write(what, sql, (agent_id, room_id, str(state)))

    # -- settings --------------------------------------------------------------------------
    async def get_setting(self, key: str) -> Any | None:
        row = await self._fetch_one(
            f"reading setting {key!r}", "SELECT value FROM settings WHERE key = ?", (key,)
        )
        return json.loads(row["value"]) if row is not None else None

    async def set_setting(self, key: str, value: Any) -> None:
        await self._write(
            f"saving setting {key!r}",
            "INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)",
            (key, json.dumps(value)),
        )
