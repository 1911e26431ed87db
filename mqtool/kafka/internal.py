"""Decoders for Kafka's internal topics, chosen by topic name (like DumpLogSegments' decoder options).

* ``__consumer_offsets``: key version = record type (0/1 OffsetCommit, 2 GroupMetadata, 3+ KIP-848 /
  share-group records, named but left raw); values OffsetCommitValue v0-v4, GroupMetadataValue v0-v4;
  a null value is a tombstone (``"<DELETE>"``, as DumpLogSegments prints it). For ``protocolType ==
  "consumer"`` the member subscription/assignment are decoded (ConsumerProtocolSubscription v0-v3 /
  ConsumerProtocolAssignment), falling back to hex when they do not parse.
* ``__transaction_state``: TransactionLogKey v0, TransactionLogValue v0 and v1 (flexible, tagged fields).
* ``__cluster_metadata`` (and KRaft snapshots): the record frame — frame version, apiKey, version.

Every decoder returns plain JSON-able data and never raises on bad bytes: it returns ``{"error": ...}``.
"""
from __future__ import annotations

import struct

from construct import ConstructError

from formats import kafka as K

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__cluster_metadata")


def _value_version(out: dict, value: bytes | None) -> int | None:
    """The int16 version that opens a coordinator value (noted in ``out``); None for a tombstone or a value
    too short to hold it (also noted)."""
    if value is None:
        out["value"] = "<DELETE>"
        return None
    if len(value) < 2:
        out["value_error"] = "value shorter than its version"
        return None
    (vv,) = struct.unpack_from(">h", value)
    out["value_version"] = vv
    return vv


def _s(v):
    """A String16/CompactString container → str or None."""
    if v is None or v.data is None:
        return None
    return bytes(v.data).decode("utf-8", errors="replace")


def _b(v):
    if v is None or v.data is None:
        return None
    return bytes(v.data).hex()


def _tags(t):
    if not t:
        return None
    return {str(x.tag): bytes(x.data).hex() for x in t}


def _items(arr):
    """PrefixedArray list or a {count, items} container."""
    if arr is None:
        return None
    if hasattr(arr, "items") and not isinstance(arr, list) and "count" in arr:
        return None if arr.count in (-1, 0) and not arr["items"] else list(arr["items"])
    return list(arr)


def decode_consumer_offsets(key: bytes | None, value: bytes | None) -> dict:
    out: dict = {}
    if key is None or len(key) < 2:
        return {"error": "key missing or shorter than its version"}
    (kv,) = struct.unpack_from(">h", key)
    out["key_version"] = kv
    out["type"] = K.CONSUMER_OFFSETS_KEY_TYPES.get(kv, f"unknown({kv})")
    try:
        if kv in (0, 1):
            k = K.OffsetCommitKey.parse(key[2:])
            out["key"] = {"group": _s(k.group), "topic": _s(k.topic), "partition": k.partition}
        elif kv >= 2:
            k = K.GroupMetadataKey.parse(key[2:])      # every later key type also starts with the group id
            out["key"] = {"group": _s(k.group)}
    except ConstructError as e:
        out["key_error"] = str(e).splitlines()[0]
    vv = _value_version(out, value)
    if vv is None:
        return out
    body = value[2:]
    try:
        if kv in (0, 1):
            if vv <= 3:
                v = K.OffsetCommitValue(vv).parse(body)
                tags = None
            else:
                v = K.OffsetCommitValueV4.parse(body)
                tags = _tags(v.taggedFields)
            out["value"] = {"offset": v.offset, "leaderEpoch": v.leaderEpoch, "metadata": _s(v.metadata),
                            "commitTimestamp": v.commitTimestamp, "expireTimestamp": v.get("expireTimestamp")}
            if tags:
                out["value"]["taggedFields"] = tags
        elif kv == 2:
            v = K.GroupMetadataValue(min(vv, 4)).parse(body)
            members = []
            consumer = _s(v.protocolType) == "consumer"
            for m in _items(v.members) or []:
                members.append({"memberId": _s(m.memberId), "groupInstanceId": _s(m.groupInstanceId),
                                "clientId": _s(m.clientId), "clientHost": _s(m.clientHost),
                                "rebalanceTimeout": m.rebalanceTimeout, "sessionTimeout": m.sessionTimeout,
                                "subscription": _consumer_subscription(m.subscription) if consumer
                                else _b(m.subscription),
                                "assignment": _consumer_assignment(m.assignment) if consumer
                                else _b(m.assignment)})
            out["value"] = {"protocolType": _s(v.protocolType), "generation": v.generation,
                            "protocol": _s(v.protocol), "leader": _s(v.leader),
                            "currentStateTimestamp": v.currentStateTimestamp, "members": members}
        else:
            out["value"] = {"raw": bytes(body).hex()}
    except (ConstructError, ValueError) as e:
        out["value_error"] = str(e).splitlines()[0]
        out["value"] = {"raw": bytes(body).hex()}
    return out


def _tps(items):
    return [{"topic": _s(t.topic), "partitions": list(t.partitions)} for t in items]


def _consumer_subscription(v):
    """ConsumerProtocolSubscription, or the raw hex when it does not parse (as DumpLogSegments falls back)."""
    raw = None if v is None or v.data is None else bytes(v.data)
    if not raw or len(raw) < 2:
        return None if raw is None else raw.hex()
    (ver,) = struct.unpack_from(">h", raw)
    try:
        s = K.ConsumerProtocolSubscription(min(max(ver, 0), 3)).parse(raw[2:])
    except (ConstructError, ValueError):
        return raw.hex()
    out = {"version": ver, "topics": [_s(t) for t in s.topics], "userData": _b(s.userData)}
    if s.ownedPartitions is not None:
        out["ownedPartitions"] = _tps(s.ownedPartitions)
    if s.generationId is not None:
        out["generationId"] = s.generationId
    if s.rackId is not None:
        out["rackId"] = _s(s.rackId)
    return out


def _consumer_assignment(v):
    raw = None if v is None or v.data is None else bytes(v.data)
    if not raw or len(raw) < 2:
        return None if raw is None else raw.hex()
    (ver,) = struct.unpack_from(">h", raw)
    try:
        a = K.ConsumerProtocolAssignment.parse(raw[2:])
    except (ConstructError, ValueError):
        return raw.hex()
    return {"version": ver, "assignedPartitions": _tps(a.assignedPartitions), "userData": _b(a.userData)}


def decode_transaction_state(key: bytes | None, value: bytes | None) -> dict:
    out: dict = {}
    if key is None or len(key) < 2:
        return {"error": "key missing or shorter than its version"}
    (kv,) = struct.unpack_from(">h", key)
    out["key_version"] = kv
    try:
        out["key"] = {"transactionalId": _s(K.TransactionLogKey.parse(key[2:]).transactionalId)}
    except ConstructError as e:
        out["key_error"] = str(e).splitlines()[0]
    vv = _value_version(out, value)
    if vv is None:
        return out
    try:
        v = K.TransactionLogValue(min(vv, 1)).parse(value[2:])
        parts = v.transactionPartitions
        if (vv >= 1 and parts.count == 0) or (vv == 0 and parts.count < 0):
            plist = None
        else:
            plist = [{"topic": _s(t.topic), "partitionIds": list(_items(t.partitionIds) or [])}
                     for t in parts["items"]]
        out["value"] = {"producerId": v.producerId, "producerEpoch": v.producerEpoch,
                        "transactionTimeoutMs": v.transactionTimeoutMs,
                        "state": K.TRANSACTION_STATUS.get(v.transactionStatus, str(v.transactionStatus)),
                        "transactionStatus": v.transactionStatus,
                        "transactionPartitions": plist,
                        "transactionLastUpdateTimestampMs": v.transactionLastUpdateTimestampMs,
                        "transactionStartTimestampMs": v.transactionStartTimestampMs}
        tags = _tags(v.taggedFields)
        if tags:
            out["value"]["taggedFields"] = tags
    except (ConstructError, ValueError) as e:
        out["value_error"] = str(e).splitlines()[0]
    return out


def decode_cluster_metadata(key: bytes | None, value: bytes | None) -> dict:
    if value is None:
        return {"error": "metadata record without a value"}
    try:
        f = K.MetadataRecordFrame.parse(value)
    except ConstructError as e:
        return {"error": str(e).splitlines()[0]}
    return {"frameVersion": f.frameVersion, "apiKey": f.apiKey,
            "type": K.METADATA_RECORD_TYPES.get(f.apiKey, f"unknown({f.apiKey})"), "version": f.version,
            "data": bytes(f.data).hex()}


def decoder_for(topic: str | None):
    if topic == "__consumer_offsets":
        return decode_consumer_offsets
    if topic == "__transaction_state":
        return decode_transaction_state
    if topic == "__cluster_metadata":
        return decode_cluster_metadata
    return None
