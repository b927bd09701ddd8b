"""Atlas Vector Search in front of a MongoDB-compatible server, for tests.

There is no Atlas here, and neither SecantusDB nor community mongod runs ``$vectorSearch``.
:class:`VectorSearchProxy` listens on loopback and speaks MongoDB's wire protocol: it passes
every message through to the server behind it, except the three commands of Atlas Vector Search,
which it answers itself as Atlas documents them:

- ``$listSearchIndexes`` (an aggregation stage) lists the search indexes defined here;
- ``createSearchIndexes`` defines one (``PENDING``, not queryable, until :meth:`make_ready`);
- ``$vectorSearch`` (the first stage of an aggregation) scores by cosine every document the
  ``filter`` matches on the server behind (so a filter means what MongoDB says it means) and
  reports ``vectorSearchScore`` as Atlas does for cosine, ``(1 + cosine) / 2``. It enforces
  Atlas's rules: the index exists (else no documents), is queryable, indexes ``path`` with the
  query's dimensions, declares every field the filter names as a ``filter`` field, and
  ``limit <= numCandidates <= 10000``. The stages after it may be ``$project`` (with ``$meta``,
  ``$add``, ``$subtract``, ``$multiply``) or ``$limit``; anything else is refused, so a change
  of the store's pipeline shows here.

Searches are exact where Atlas's are approximate; the store treats the answers the same way.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import struct
import threading
from collections.abc import Mapping
from typing import Any

import bson
from bson.binary import Binary
from pymongo import MongoClient

OP_MSG = 2013
MAX_CANDIDATES = 10_000
_FILTER_OPERATORS = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$not"}
_LOGICAL = {"$and", "$or", "$nor"}


class VectorSearchProxy:
    """A loopback proxy adding Atlas Vector Search to the server at ``upstream`` (host, port)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0
        self.indexes: dict[tuple[str, str, str], dict[str, Any]] = {}
        """(database, collection, name) → the index as ``$listSearchIndexes`` reports it."""
        self.searches: list[dict[str, Any]] = []
        """Every ``$vectorSearch`` stage answered (with its database), oldest first."""
        self._ids = itertools.count(1)
        self._client: MongoClient[dict[str, Any]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._lock = threading.Lock()

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/"

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        host, port = self.upstream
        self._client = MongoClient(host, port, directConnection=True)
        self._thread = threading.Thread(target=self._run, name="atlas-search-proxy", daemon=True)
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the vector search proxy did not start")

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        if self._client is not None:
            self._client.close()

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._started.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            tasks = asyncio.all_tasks(loop)  # the connections still open
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.close()

    # -- indexes -------------------------------------------------------------------------------
    def define(
        self, database: str, collection: str, *, name: str, definition: Mapping[str, Any]
    ) -> None:
        """Define a queryable vector search index (as one built a while ago)."""
        with self._lock:
            self.indexes[(database, collection, name)] = {
                "id": f"idx{next(self._ids)}",
                "name": name,
                "type": "vectorSearch",
                "status": "READY",
                "queryable": True,
                "latestDefinition": dict(definition),
            }

    def make_ready(self) -> None:
        """Finish building every pending index."""
        with self._lock:
            for index in self.indexes.values():
                index.update(status="READY", queryable=True)

    # -- the wire ------------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:  # the server behind is gone: the client sees its connection close
            writer.close()
            return
        back = asyncio.create_task(self._pump(up_reader, writer))
        try:
            while True:
                frame = await _read_frame(reader)
                if frame is None:
                    break
                reply = await self._answer(frame)
                if reply is None:
                    up_writer.write(frame)
                else:
                    writer.write(reply)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            back.cancel()
            up_writer.close()
            writer.close()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (frame := await _read_frame(reader)) is not None:
                writer.write(frame)
                await writer.drain()
        except ConnectionError:
            pass

    async def _answer(self, frame: bytes) -> bytes | None:
        """The reply to a vector search command, or None to pass the message on."""
        (request_id,) = struct.unpack_from("<i", frame, 4)
        (op_code,) = struct.unpack_from("<i", frame, 12)
        if op_code != OP_MSG or frame[20] != 0:  # only a body section first
            return None
        flags = struct.unpack_from("<I", frame, 16)[0]
        if flags & 1:  # a checksum: never sent by pymongo without compression
            return None
        size = struct.unpack_from("<i", frame, 21)[0]
        body = bson.decode(frame[21 : 21 + size])
        command = next(iter(body))
        pipeline = body.get("pipeline") or [{}]
        if command == "createSearchIndexes":
            reply = self._create(body)
        elif command == "aggregate" and "$listSearchIndexes" in pipeline[0]:
            reply = self._list(body)
        elif command == "aggregate" and "$vectorSearch" in pipeline[0]:
            reply = await asyncio.to_thread(self._vector_search, body)
        else:
            return None
        payload = struct.pack("<IB", 0, 0) + bson.encode(reply)
        header = struct.pack("<iiii", 16 + len(payload), next(self._ids), request_id, OP_MSG)
        return header + payload

    # -- the commands --------------------------------------------------------------------------
    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        database, collection = body["$db"], body["createSearchIndexes"]
        created = []
        with self._lock:
            for spec in body["indexes"]:
                key = (database, collection, spec["name"])
                if key in self.indexes:
                    return _error(68, f"search index {spec['name']} already exists")
                self.indexes[key] = {
                    "id": f"idx{next(self._ids)}",
                    "name": spec["name"],
                    "type": spec.get("type", "search"),
                    "status": "PENDING",
                    "queryable": False,
                    "latestDefinition": spec["definition"],
                }
                created.append({"id": self.indexes[key]["id"], "name": spec["name"]})
        return {"indexesCreated": created, "ok": 1.0}

    def _list(self, body: dict[str, Any]) -> dict[str, Any]:
        database, collection = body["$db"], body["aggregate"]
        wanted = body["pipeline"][0]["$listSearchIndexes"].get("name")
        with self._lock:
            found = [
                dict(index)
                for (db, coll, name), index in self.indexes.items()
                if (db, coll) == (database, collection) and wanted in (None, name)
            ]
        return _cursor(database, collection, found)

    def _vector_search(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._run_vector_search(body)
        except ValueError as exc:
            return _error(8, str(exc))

    def _run_vector_search(self, body: dict[str, Any]) -> dict[str, Any]:
        database, collection = body["$db"], body["aggregate"]
        stage, *rest = body["pipeline"]
        spec = stage["$vectorSearch"]
        self.searches.append({"database": database, **spec})
        with self._lock:
            index = self.indexes.get((database, collection, spec.get("index", "")))
            index = dict(index) if index is not None else None
        if index is None:
            return _cursor(database, collection, [])  # as Atlas: no such index, no documents
        if not index["queryable"]:
            return _error(8, f"search index {index['name']} is not queryable yet")
        fields = index["latestDefinition"]["fields"]
        vector = next((f for f in fields if f["type"] == "vector"), None)
        query = [float(x) for x in spec["queryVector"]]
        if vector is None or spec.get("path") != vector["path"]:
            return _error(8, f"path {spec.get('path')!r} is not indexed as a vector")
        if len(query) != vector["numDimensions"]:
            return _error(
                8, f"queryVector has {len(query)} dimensions, the index {vector['numDimensions']}"
            )
        limit, candidates = int(spec["limit"]), int(spec["numCandidates"])
        if not 0 < limit <= candidates <= MAX_CANDIDATES:
            return _error(8, f"need 0 < limit ({limit}) <= numCandidates ({candidates}) <= 10000")
        declared = {f["path"] for f in fields if f["type"] == "filter"}
        where = spec.get("filter") or {}
        undeclared = _filter_fields(where) - declared
        if undeclared:
            return _error(8, f"filter fields not indexed as filter: {sorted(undeclared)}")
        assert self._client is not None
        docs = self._client[database][collection].find(where, {vector["path"]: 1})
        scored = []
        for doc in docs:
            stored = _vector(doc.get(vector["path"]))
            if stored is not None and len(stored) == len(query):
                scored.append(((1 + _cosine(query, stored)) / 2, doc["_id"]))
        scored.sort(key=lambda pair: -pair[0])
        out = [({"_id": doc_id}, score) for score, doc_id in scored[:limit]]
        for later in rest:
            name, arg = next(iter(later.items()))
            if name == "$project":
                out = [(_project(doc, arg, score), score) for doc, score in out]
            elif name == "$limit":
                out = out[: int(arg)]
            else:
                return _error(8, f"the vector search proxy does not run {name} after $vectorSearch")
        return _cursor(database, collection, [doc for doc, _ in out])


# -- helpers ---------------------------------------------------------------------------------------
async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readexactly(4)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = struct.unpack("<i", head)[0]
    try:
        return head + await reader.readexactly(length - 4)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


def _cursor(database: str, collection: str, docs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"cursor": {"id": 0, "ns": f"{database}.{collection}", "firstBatch": docs}, "ok": 1.0}


def _error(code: int, message: str) -> dict[str, Any]:
    return {"ok": 0.0, "errmsg": message, "code": code}


def _filter_fields(where: Mapping[str, Any]) -> set[str]:
    """The fields a ``$vectorSearch`` filter names; raises on an operator Atlas refuses."""
    fields: set[str] = set()
    for key, value in where.items():
        if key in _LOGICAL:
            for part in value:
                fields |= _filter_fields(part)
        elif key.startswith("$"):
            raise ValueError(f"$vectorSearch filters do not take {key}")
        else:
            fields.add(key)
            if isinstance(value, Mapping):
                bad = [op for op in value if op not in _FILTER_OPERATORS]
                if bad:
                    raise ValueError(f"$vectorSearch filters do not take {bad}")
    return fields


def _vector(value: Any) -> list[float] | None:
    if isinstance(value, Binary) and value.subtype == 9:
        return [float(x) for x in value.as_vector().data]
    if isinstance(value, list):
        return [float(x) for x in value]
    return None


def _cosine(a: list[float], b: list[float]) -> float:
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norms if norms else 0.0


def _project(doc: dict[str, Any], spec: Mapping[str, Any], score: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, expr in spec.items():
        if expr in (1, True):
            if field in doc:
                out[field] = doc[field]
        elif expr not in (0, False):
            out[field] = _evaluate(expr, score)
    if spec.get("_id", 1) not in (0, False):
        out.setdefault("_id", doc["_id"])
    return out


def _evaluate(expr: Any, score: float) -> Any:
    if not isinstance(expr, Mapping):
        return expr
    (op, arg), *more = expr.items()
    if more:
        raise ValueError(f"one operator per expression: {dict(expr)}")
    if op == "$meta":
        if arg != "vectorSearchScore":
            raise ValueError(f"no $meta {arg!r} after $vectorSearch")
        return score
    values = [_evaluate(a, score) for a in arg]
    if op == "$add":
        return sum(values)
    if op == "$multiply":
        return math.prod(values)
    if op == "$subtract":
        return values[0] - values[1]
    raise ValueError(f"the vector search proxy does not evaluate {op}")
