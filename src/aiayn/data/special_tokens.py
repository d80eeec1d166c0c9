"""Special tokens: which ids pad, open and close a sequence, and stand for unknown text.

The ids are data, not constants: they come with the tokenizer and are stored in the model
directory's `config.json` (`pad_id`, `bos_id`, `eos_id`, `unk_id`), from where every consumer
reads them. Tokenizers that aiayn trains put them first: `<pad> <bos> <eos> <unk>` at ids 0..3
(`TRAINED_SPECIALS`). A tokenizer loaded from a Hugging Face `tokenizer.json` has its own;
:func:`resolve_special_tokens` finds them by these rules:

1. A tokenizer whose ids 0..3 are `<pad> <bos> <eos> <unk>` (one that aiayn trained) keeps
   them.
2. Otherwise the unknown token is the one the tokenizer's model emits for unknown input (its
   `unk_token`), or a special token named `<unk>`/`[UNK]`; byte-level vocabularies have none.
   Special ("added") tokens with a conventional name take that role: `<pad>`/`[PAD]`/`<|pad|>`,
   `<bos>`/`<s>`/`[CLS]`, `<eos>`/`</s>`/`[SEP]`. When neither bos nor eos is found and exactly one
   special token is left (GPT-2's `<|endoftext|>`), it is both.
3. Names given in `data.special_tokens` (`pad`, `bos`, `eos`, `unk`) win over rules 1 and 2;
   each must be a token of the vocabulary (`unk` may be null: no unknown token).
4. A tokenizer without a padding token gets one appended, `<pad>` (the embedding grows by one
   row), and the log says so.
5. Anything left undecided (no bos or eos) is an error asking for `data.special_tokens`; so is a
   pad that is also bos, eos or unk (pad positions are masked and never predicted).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import tokenizers

from aiayn.core.errors import ConfigError, DataError

log = logging.getLogger(__name__)

# The layout of every tokenizer that aiayn trains (and the meaning of a model directory whose
# config.json predates the stored ids).
PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
UNK_ID = 3
SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]

ROLES = ("pad", "bos", "eos", "unk")
CONVENTIONAL_NAMES = {
    "pad": ("<pad>", "[PAD]", "<|pad|>"),
    "bos": ("<bos>", "<s>", "[CLS]"),
    "eos": ("<eos>", "</s>", "[SEP]"),
    "unk": ("<unk>", "[UNK]"),
}


@dataclass(frozen=True)
class SpecialTokens:
    """The special token ids of a vocabulary (the fields are named as in `ModelConfig`).

    Attributes:
        pad_id: fills sequences to a common length; masked, never predicted.
        bos_id: opens every decoder input (and every language-model stream).
        eos_id: closes every source and target; may equal `bos_id` (GPT-2's `<|endoftext|>`).
        unk_id: the unknown-input token, or None when the vocabulary has none.
    """

    pad_id: int
    bos_id: int
    eos_id: int
    unk_id: int | None

    @classmethod
    def of(cls, config: Any) -> SpecialTokens:
        """The ids stored in a model config (any object with `pad_id` .. `unk_id` attributes)."""
        return cls(config.pad_id, config.bos_id, config.eos_id, config.unk_id)

    @property
    def ids(self) -> frozenset[int]:
        """Every special id: what decoding drops, and nothing else."""
        return frozenset(i for i in (self.pad_id, self.bos_id, self.eos_id, self.unk_id) if i is not None)

    def as_dict(self) -> dict[str, int | None]:
        """`{"pad_id": .., "bos_id": .., "eos_id": .., "unk_id": ..}`, as `ModelConfig` fields."""
        return {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id, "unk_id": self.unk_id}


TRAINED_SPECIALS = SpecialTokens(PAD_ID, BOS_ID, EOS_ID, UNK_ID)


def check_special_token_names(names: Any, where: str = "data.special_tokens") -> dict[str, str | None]:
    """Validate a `data.special_tokens` mapping (role -> token string) and return it as a dict."""
    if names is None:
        return {}
    if not isinstance(names, Mapping):
        raise ConfigError(f"{where} must be a mapping of {', '.join(ROLES)} to tokens, got {names!r}")
    unknown = sorted(str(k) for k in names if k not in ROLES)
    if unknown:
        raise ConfigError(f"{where}: unknown role(s) {', '.join(unknown)}; valid roles: {', '.join(ROLES)}")
    for role, token in names.items():
        if token is None and role == "unk":
            continue
        if not isinstance(token, str) or not token:
            raise ConfigError(
                f"{where}.{role} must be a token string{' or null' if role == 'unk' else ''}, got {token!r}"
            )
    return dict(names)


def resolve_special_tokens(
    hf: tokenizers.Tokenizer, names: Mapping[str, str | None] | None = None, origin: str = "tokenizer"
) -> SpecialTokens:
    """Find the special ids of `hf` by the rules of the module docstring.

    `hf` gains a `<pad>` token when it has none (rule 4). `origin` names the tokenizer (its
    file or Hub name) in messages. Raises `DataError` for a name not in the vocabulary or an
    undecidable layout, `ConfigError` for a malformed `names` mapping.
    """
    names = check_special_token_names(names)
    found: dict[str, int | None] = {}
    if [hf.id_to_token(i) for i in range(len(SPECIAL_TOKENS))] == SPECIAL_TOKENS:
        found = dict(zip(ROLES, range(len(ROLES)), strict=True))  # rule 1: trained by aiayn
    else:
        found = _by_convention(hf)
    for role, token in names.items():  # rule 3
        if token is None:
            found[role] = None
            continue
        token_id = hf.token_to_id(token)
        if token_id is None:
            raise DataError(
                f"{origin}: data.special_tokens.{role} {token!r} is not a token of its vocabulary"
            )
        if not _is_special(hf, token):
            log.warning("%s: %s token %r is an ordinary token: text can produce it too", origin, role, token)
        found[role] = token_id
    missing = [role for role in ("bos", "eos") if found.get(role) is None]
    if missing:
        specials = [t for t, _ in _special_added_tokens(hf)]
        raise DataError(
            f"{origin}: cannot tell which token is {' and '.join(missing)} (special tokens: "
            f"{', '.join(specials) or 'none'}); name them in data.special_tokens, e.g. "
            f"data.special_tokens={{bos: '<s>', eos: '</s>'}}"
        )
    if found.get("pad") is None:  # rule 4
        found["pad"] = _append_pad(hf, origin)
    specials = SpecialTokens(found["pad"], found["bos"], found["eos"], found.get("unk"))
    _check_distinct(hf, specials, origin)
    return specials


def _check_distinct(hf: tokenizers.Tokenizer, specials: SpecialTokens, origin: str) -> None:
    """Pad needs a token of its own; so does unk. Bos and eos may share one."""
    for role, token_id in (("bos", specials.bos_id), ("eos", specials.eos_id), ("unk", specials.unk_id)):
        if token_id == specials.pad_id:
            raise DataError(
                f"{origin}: the padding token {hf.id_to_token(token_id)!r} is also {role}; padding "
                "needs a token of its own (leave data.special_tokens.pad out to have one appended)"
            )
    if specials.unk_id is not None and specials.unk_id in (specials.bos_id, specials.eos_id):
        raise DataError(f"{origin}: the unknown token {hf.id_to_token(specials.unk_id)!r} is also bos or eos")


def _special_added_tokens(hf: tokenizers.Tokenizer) -> list[tuple[str, int]]:
    """(content, id) of the tokenizer's special added tokens, by id."""
    decoder = hf.get_added_tokens_decoder()
    return sorted(((t.content, i) for i, t in decoder.items() if t.special), key=lambda item: item[1])


def _is_special(hf: tokenizers.Tokenizer, token: str) -> bool:
    return any(content == token for content, _ in _special_added_tokens(hf))


def _model_unk_token(hf: tokenizers.Tokenizer) -> str | None:
    """The token the tokenizer's model emits for unknown input, if it has one."""
    if isinstance(hf.model, tokenizers.models.Unigram):  # keeps an index, not a string
        model = json.loads(hf.to_str())["model"]
        unk_id, vocab = model.get("unk_id"), model.get("vocab") or []
        return str(vocab[unk_id][0]) if isinstance(unk_id, int) and 0 <= unk_id < len(vocab) else None
    unk = getattr(hf.model, "unk_token", None)
    return unk if isinstance(unk, str) else None


def _by_convention(hf: tokenizers.Tokenizer) -> dict[str, int | None]:
    """Rule 2: roles from the model's unknown token and the special tokens' names."""
    added = _special_added_tokens(hf)
    found: dict[str, int | None] = {}
    unk = _model_unk_token(hf)
    if unk is not None and hf.token_to_id(unk) is not None:
        found["unk"] = hf.token_to_id(unk)
    for role, conventional in CONVENTIONAL_NAMES.items():
        for content, token_id in added:
            if role not in found and content in conventional and token_id not in found.values():
                found[role] = token_id
    left = [token_id for _, token_id in added if token_id not in found.values()]
    if "bos" not in found and "eos" not in found and len(left) == 1:
        found["bos"] = found["eos"] = left[0]
    return found


def _append_pad(hf: tokenizers.Tokenizer, origin: str) -> int:
    """Add a special padding token to `hf` (the first conventional name not in its vocabulary)."""
    name = next((n for n in CONVENTIONAL_NAMES["pad"] if hf.token_to_id(n) is None), None)
    if name is None:
        raise DataError(f"{origin}: no padding token and no free name for one; set data.special_tokens.pad")
    hf.add_special_tokens([tokenizers.AddedToken(name, special=True, normalized=False)])
    pad_id = hf.token_to_id(name)
    log.info(
        "%s has no padding token: appended %s as id %d (the embedding grows by one row)", origin, name, pad_id
    )
    return pad_id
