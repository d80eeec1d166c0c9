"""A Hugging Face `datasets` dataset as a training corpus (the `datasets` extra).

`data.train` entries (see `aiayn.translation.data`):

    {hf: wmt14, config: de-en, split: train}            # from the Hub (needs the internet once)
    {hf: parquet, files: [a.parquet, b.parquet]}         # local files: parquet, json (lines) or csv

The two texts of a row are its fields named after `data.src_lang` and `data.tgt_lang`, at the
top of the row or inside its `translation` mapping (the Hub's translation datasets), unless
`src_field`/`tgt_field` name others. `datasets` keeps the rows in memory-mapped Arrow files;
aiayn streams them in batches into its token store like any other corpus.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiayn.core.errors import ConfigError, DataError
from aiayn.data.paths import resolve_data_file
from aiayn.data.sources import PairSource, file_fingerprint

LOCAL_BUILDERS = ("parquet", "json", "csv")
ROWS_PER_READ = 4096


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            "a Hugging Face dataset in data.train needs the `datasets` extra: pip install 'aiayn[datasets]'"
        ) from None
    return datasets


class HFPairs(PairSource):
    """The rows of a `datasets` dataset as (source, target) pairs."""

    def __init__(
        self,
        where: str,
        name: str,
        *,
        files: list[Path] | None,
        config: str | None,
        split: str,
        fields: tuple[str, str],
        weight: float = 1.0,
    ) -> None:
        super().__init__(
            f"{name}:{','.join(map(str, files))}" if files else f"{name}/{config}/{split}", weight
        )
        self.where, self.hf_name, self.files = where, name, files
        self.config, self.split, self.fields = config, split, fields
        self._dataset: Any = None

    @classmethod
    def from_entry(
        cls, entry: dict[str, Any], where: str, src_lang: str, tgt_lang: str, weight: float
    ) -> HFPairs:
        """The source `data.train[i]` describes (`where` names it in errors)."""
        name = entry["hf"]
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}.hf must be a dataset name or one of {', '.join(LOCAL_BUILDERS)}")
        files = entry.get("files")
        if name in LOCAL_BUILDERS:
            if isinstance(files, str):
                files = [files]
            if not files or not isinstance(files, list):
                raise ConfigError(f"{where}: hf: {name} reads local files; list them in {where}.files")
            files = [resolve_data_file(f, f"{where}.files") for f in files]
        elif files:
            raise ConfigError(f"{where}.files is for hf: {'|'.join(LOCAL_BUILDERS)} (local files)")
        fields = (str(entry.get("src_field", src_lang)), str(entry.get("tgt_field", tgt_lang)))
        return cls(
            where,
            name,
            files=files,
            config=entry.get("config"),
            split=str(entry.get("split", "train")),
            fields=fields,
            weight=weight,
        )

    def dataset(self) -> Any:
        """The `datasets.Dataset`, loaded once (a Hub name offline -> one-line `DataError`)."""
        if self._dataset is None:
            datasets = _datasets()
            try:
                if self.files:
                    files = [str(f) for f in self.files]
                    self._dataset = datasets.load_dataset(self.hf_name, data_files=files, split="train")
                else:
                    self._dataset = datasets.load_dataset(self.hf_name, self.config, split=self.split)
            except Exception as err:  # datasets raises many kinds (connection, not found, parse)
                reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                hint = "" if self.files else "; offline, give local files: {hf: parquet, files: [...]}"
                raise DataError(
                    f"{self.where}: cannot load Hugging Face dataset {self.name!r}: {reason}{hint}"
                ) from None
        return self._dataset

    def count(self) -> int:
        return len(self.dataset())

    def _text(self, row: dict[str, Any], field: str, number: int) -> str:
        value = row.get(field)
        if value is None and isinstance(row.get("translation"), dict):
            value = row["translation"].get(field)
        if not isinstance(value, str):
            raise DataError(
                f"{self.where} ({self.name}): row {number} has no text field {field!r} "
                f"(fields: {', '.join(row)}); name it with src_field/tgt_field"
            )
        return value

    def pairs(self) -> Iterator[tuple[str, str]]:
        dataset = self.dataset()
        src_field, tgt_field = self.fields
        number = 0
        for batch in dataset.iter(batch_size=ROWS_PER_READ):
            columns = list(batch)
            for values in zip(*(batch[c] for c in columns), strict=True):
                row = dict(zip(columns, values, strict=True))
                yield self._text(row, src_field, number), self._text(row, tgt_field, number)
                number += 1

    def fingerprint(self) -> dict[str, Any]:
        if self.files:
            content: Any = [file_fingerprint(f) for f in self.files]
        else:
            content = getattr(self.dataset(), "_fingerprint", None)
        return {
            "hf": self.hf_name,
            "config": self.config,
            "split": self.split,
            "fields": self.fields,
            "content": content,
        }
