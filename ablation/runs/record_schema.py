"""The declared schema of ``run.json``, shared by the writer and the reader.

Records are validated before writing and after reading, so the suite never
writes a record its own reporter rejects, and a record with wrong types is
refused, naming the field, instead of being half-read into a wrong table
(``"spt": "false"`` read as true). Types are strict; accuracies are fractions in
[0, 1]; unknown keys are kept (a newer writer may add fields).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt,
                      StrictStr, ValidationError, create_model)

from ablation.config.choices import WANDB_MODES
from ablation.config.switches import SWITCHES

SCHEMA_VERSION = 1
STATUSES = ("completed", "failed", "interrupted")
RUN_ID = r"^[A-Za-z0-9_-]{1,128}$"  # a W&B run id: a plain name, never a path

Number = Annotated[StrictFloat, Field(allow_inf_nan=False)]  # an integer is a number too
Fraction = Annotated[Number, Field(ge=0, le=1)]
NonNegative = Annotated[Number, Field(ge=0)]
Count = Annotated[StrictInt, Field(ge=0, lt=2**63)]  # a count a table can hold
Name = Annotated[StrictStr, Field(min_length=1)]


class _Open(BaseModel):
    """Unknown keys are allowed (forward compatible); known keys are typed strictly."""

    model_config = ConfigDict(extra="allow", strict=True)


# every switch of the registry, a strict boolean
Switches = create_model("Switches", __base__=_Open, **{key: (StrictBool, ...) for key in SWITCHES})


class Metrics(_Open):
    # NaN and infinity are written as null (see ablation.runs.record), so every number may be null.
    test_top1: Fraction | None = None
    test_top5: Fraction | None = None
    test_loss: Number | None = None
    best_val_top1: Fraction | None = None
    final_val_top1: Fraction | None = None
    best_test_top1: Fraction | None = None   # protocol "official": test every epoch
    best_test_top5: Fraction | None = None
    best_test_epoch: Count | None = None


class HistoryRow(BaseModel):
    """One epoch: its number and numbers (``train/loss``, ``locality/...``, ...)."""

    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[str, Number | None]
    epoch: Annotated[StrictInt, Field(ge=1)]


class Data(_Open):
    """What the run trained and was measured on: image counts (a test split has images)."""
    train: Count | None = None
    val: Count | None = None
    test: Annotated[StrictInt, Field(ge=1, lt=2**63)] | None = None
    num_classes: Annotated[StrictInt, Field(ge=2, lt=2**31)] | None = None


WandbMode = Literal[WANDB_MODES]  # the config's modes; anything else: wandb.Settings raises


class Wandb(_Open):
    id: Annotated[StrictStr, Field(pattern=RUN_ID)] | None = None
    dir: StrictStr | None = None
    mode: WandbMode | None = None
    project: StrictStr | None = None
    group: StrictStr | None = None
    problems: list[StrictStr] | None = None


class Record(_Open):
    schema_: Literal[1] = Field(alias="schema")
    status: Literal[STATUSES]
    switches: Switches
    dataset: Name
    model: Name
    seed: StrictInt
    config: dict[str, Any]
    run_name: Name | None = None
    variant: Name | None = None
    metrics: Metrics = Field(default_factory=Metrics)
    history: list[HistoryRow] = Field(default_factory=list)
    params: Count | None = None
    trainable_params: Count | None = None
    epochs_completed: Count | None = None
    resumed_from_epoch: Count | None = None
    resumed_from_epochs: list[Count] | None = None
    train_seconds: NonNegative | None = None
    train_images_per_s: NonNegative | None = None
    protocol: Literal["holdout", "official"] | None = None
    role: Literal["trial", "final"] | None = None  # trial: a tuned sweep's search job
    tuning: dict[str, Any] | None = None       # the search of a trial or a tuned final run
    wandb: Wandb | None = None
    environment: dict[str, Any] | None = None
    data: Data | None = None
    normalization: dict[str, Any] | None = None  # the input normalisation's source and statistics
    code_history: list[dict[str, Any]] | None = None  # the code of each attempt (resumes)
    diagnostics: dict[str, Any] | None = None
    model_file: StrictStr | None = None       # the trained model, beside the record
    model_error: StrictStr | None = None      # why it could not be saved (its numbers stand)
    timings: dict[str, Number | None] | None = None  # seconds per phase of the job
    started_at: StrictStr | None = None
    finished_at: StrictStr | None = None
    error: StrictStr | None = None
    traceback: StrictStr | None = None
    unsaved: list[StrictStr] | None = None     # fields left out: the disk refused the whole
    save_error: StrictStr | None = None        # ... and why


class SchemaError(ValueError):
    """A record that does not fit :class:`Record`: ``<field>: <problem>``, the first bad field."""


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _validate(model: type[BaseModel], value: Any, prefix: str = "") -> None:
    """``model.model_validate(value)``; a failure as :class:`SchemaError` (its first field)."""
    try:
        model.model_validate(value)
    except ValidationError as e:
        errors = e.errors(include_url=False)
        first = errors[0]
        field = prefix + ".".join(str(p) for p in first["loc"]) or "(record)"
        problem = " ".join(first["msg"].split())
        if first["type"] != "missing" and first["loc"]:
            problem += f" (got {_short(first.get('input'))})"
        if len(errors) > 1:
            problem += f"; {len(errors) - 1} more problem(s)"
        raise SchemaError(f"{field}: {problem}") from None


def validate_history(history: list) -> None:
    """A record's per-epoch rows (a checkpoint state's too): numbers, epochs increasing,
    accuracies in [0, 1]; raise :class:`SchemaError`."""
    for i, row in enumerate(history):
        _validate(HistoryRow, row, f"history.{i}.")
    _check_history(history)


# Top-5 counts every image top-1 counts: a smaller top-5 is a wrong record. Both are
# means over the same images, so only float round-off may separate equal values.
_ROUND_OFF = 1e-9


def validate_record(record: Any) -> None:
    """Raise :class:`SchemaError` (one line: the field, what is wrong, the value)."""
    if not isinstance(record, dict):
        raise SchemaError(f"(record): not a JSON object ({type(record).__name__})")
    version = record.get("schema")
    if type(version) is not int or version != SCHEMA_VERSION:  # not true, not 1.0
        raise SchemaError(f"schema: unknown schema {_short(version)} "
                          f"(this version reads {SCHEMA_VERSION})")
    _validate(Record, record)
    metrics = record.get("metrics") or {}
    if record["status"] == "completed":  # a failed run may have measured nothing
        for key in ("test_top1", "test_top5"):
            if metrics.get(key) is None:
                raise SchemaError(f"metrics.{key}: required when status is completed")
    # what types cannot say: top-5 >= top-1, history accuracies in [0, 1], history
    # epochs strictly increasing
    for top1, top5 in (("test_top1", "test_top5"), ("best_test_top1", "best_test_top5")):
        a, b = metrics.get(top1), metrics.get(top5)
        if a is not None and b is not None and b < a - _ROUND_OFF:
            raise SchemaError(f"metrics.{top5}: below metrics.{top1} ({b!r} < {a!r}): "
                              "top-5 can never be below top-1")
    _check_history(record.get("history") or [])


def _check_history(history: list) -> None:
    previous = 0
    for i, row in enumerate(history):
        if row["epoch"] <= previous:
            raise SchemaError(f"history.{i}.epoch: epochs must increase (got {row['epoch']} "
                              f"after {previous})")
        previous = row["epoch"]
        for key, value in row.items():
            if key.endswith(("/top1", "/top5")) and value is not None and not 0 <= value <= 1:
                raise SchemaError(f"history.{i}.{key}: an accuracy must be a fraction in [0, 1] "
                                  f"(got {_short(value)})")
