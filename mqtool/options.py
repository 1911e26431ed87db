"""Option bundles passed from the CLI to the engines (one per verb). Plain data, no behaviour."""
from __future__ import annotations

from mqtool.plainclass import dataclass, field


@dataclass
class SizeOptions:
    """Store geometry the user states (shared by every verb that reads consumequeue, index or Kafka index files).

    Each size not given comes from ``broker_conf``, else from the store's own files, else the broker default;
    each family decides in one place (``mqtool.rocketmq.indexfiles``, ``mqtool.litemq.indexfiles``,
    ``mqtool.kafka.interval``) and says which source decided.
    """

    broker_conf: str | None = None          # broker.conf / .properties / broker.toml / server.properties
    cq_file_size: int | None = None         # consumequeue file size in bytes (RocketMQ, LiteMQ)
    max_hash_slots: int | None = None       # RocketMQ maxHashSlotNum
    max_index_num: int | None = None        # RocketMQ maxIndexNum
    index_interval_bytes: int | None = None  # Kafka index.interval.bytes


@dataclass(frozen=True)
class SizeDecision:
    """One size as decided for a store: the value, where it came from (``option``, ``broker-conf``, ``store``,
    ``default``), what in the store showed it, and the other values that would fit as well (a ``warning``
    names them when the store cannot tell)."""

    value: int | None
    source: str
    evidence: str = ""
    candidates: tuple = ()
    warning: str | None = None
    severity: str = "warning"        # of the finding that carries ``warning`` ("info": explained, not a doubt)

    def to_dict(self, name: str) -> dict:
        return {name: self.value, "from": self.source, "evidence": self.evidence or None}


@dataclass
class DumpOptions(SizeOptions):
    topic: str | None = None
    key: str | None = None
    tag: str | None = None
    queue: int | None = None
    from_offset: int | None = None
    to_offset: int | None = None
    limit: int | None = None
    body: str = "none"            # none | text | hex | base64
    include_blank: bool = False
    include_stale: bool = False
    slots: bool = False            # index dumps: non-empty slots too
    deep: bool = False             # kafka: records inside batches
    print_data: bool = False       # kafka: keys/values (implies deep)
    max_bytes: int | None = None   # kafka: stop after N bytes of each segment
    max_message_size: int = 4 * 1024 * 1024
    jobs: int = 1                  # worker processes over byte ranges (0 = all cores); see mqtool.ranges
    split_size: int | None = None  # byte-range size (None = automatic)
    runner: object = None          # mqtool.ranges runner (e.g. Spark); overrides jobs
    ndjson: bool = False           # output is NDJSON: pool workers may hand back render.PreRendered lines
    write_direct: bool = False     # the caller's writer takes ndjson.Direct rows (the CLI's write_ndjson)


@dataclass
class VerifyOptions(SizeOptions):
    max_message_size: int = 4 * 1024 * 1024
    salvage_out: str | None = None
    force: bool = False
    jobs: int = 1                  # worker processes over byte ranges (0 = all cores); see mqtool.ranges
    progress: bool | None = None   # None = when stderr is a terminal
    deep: bool = False             # kafka: records inside batches too
    split_size: int | None = None  # byte-range size (None = automatic)
    runner: object = None          # mqtool.ranges runner (e.g. Spark); overrides jobs


@dataclass
class RebuildOptions(SizeOptions):
    out: str | None = None
    force: bool = False
    compare: bool = False
    write_checkpoint: bool = False
    trim: bool = False
    preallocate: bool = False
    with_index: bool = False       # litemq: also write the key index file in LiteMQ's format
    no_store_hints: bool = False   # litemq: do not use the store's consumequeue for tx commits / entry times


@dataclass
class QueryOptions(SizeOptions):
    key: str | None = None
    unique_key: str | None = None
    msg_id: str | None = None
    offset: int | None = None
    containing: bool = False
    topic: str | None = None
    queue: int | None = None
    queue_offset: int | None = None
    count: int = 1
    time_from: int | None = None   # epoch ms
    time_to: int | None = None
    begin: int | None = None
    end: int | None = None
    max: int = 64
    scan: bool = False
    timestamp: int | None = None   # kafka: by time
    producer_id: int | None = None
    body: str = "none"
    include_stale: bool = False    # litemq: --key/--msg-id also search carved stale records


@dataclass
class ScanStats:
    """What a dump/query met on the way: damaged ranges are counted here and reported on stderr."""

    damaged: int = 0
    messages: int = 0
    notes: list = field(default_factory=list)
    scanned: bool = False          # a key query answered by scanning the log (not only through the index)
    noted_at: set = field(default_factory=set)

    def note(self, text: str) -> None:
        """A note for the operator that is not damage (printed on stderr like the damage notes)."""
        if len(self.notes) < 1000:
            self.notes.append(text)

    def damage(self, text: str, at: tuple | None = None) -> None:
        """Count one damaged range; ``at`` ((file, position)) counts a place once however often it is met."""
        if at is not None:
            if at in self.noted_at:
                return
            if len(self.noted_at) < 100_000:
                self.noted_at.add(at)
        self.damaged += 1
        if len(self.notes) < 1000:
            self.notes.append(text)


@dataclass
class InfoOptions(SizeOptions):
    bucket_ms: int | None = None   # timeline bucket width; None = auto
    max_buckets: int = 60          # auto bucket: the narrowest width giving at most this many buckets
    max_message_size: int = 4 * 1024 * 1024
    progress: bool | None = None   # None = when stderr is a terminal


@dataclass
class CarveOptions:
    """``mqtool carve``: which families to search for, and what to do with what is found."""

    families: tuple = ("rocketmq", "kafka", "litemq")
    deep: bool = False             # kafka: a row for every record inside each carved batch
    max_message_size: int = 4 * 1024 * 1024   # rocketmq: the broker's maxMessageSize (larger units are refused)
    salvage_out: str | None = None
    force: bool = False
    progress: bool | None = None   # None = when stderr is a terminal
    ndjson: bool = False           # the rows go out as NDJSON: families may hand over pre-rendered lines
