"""Our tokenizers as Hugging Face fast tokenizers (`AutoTokenizer.from_pretrained(OUT)`).

aiayn's tokenizer files are `tokenizers` JSON already; what transformers needs besides is to
know the special tokens, and, for a translation model, that a source ends with `<eos>`:
a post-processor appends it, so `tokenizer(text)` alone prepares model input, exactly the
ids aiayn's translator feeds its encoder. `decode(ids, skip_special_tokens=True)` drops the
special tokens, as aiayn's decoding does.

Special tokens are never read from text, as in aiayn (`split_special_tokens`): the literal
text "<eos>" in an input is spelled out, and only the post-processor puts `<eos>` in place.

With separate vocabularies the directory holds the source tokenizer (for model input), and the
target tokenizer in the sub-folder `target_tokenizer/` (to decode outputs):
`AutoTokenizer.from_pretrained(OUT, subfolder="target_tokenizer")`.
"""

from __future__ import annotations

from pathlib import Path

from aiayn.core.errors import ConfigError
from aiayn.data.tokenizer import Tokenizer
from aiayn.export.common import ExportSource
from aiayn.formats.hf_format import TARGET_SUBFOLDER
from aiayn.model.config import ModelConfig


def hf_tokenizer(tokenizer: Tokenizer, config: ModelConfig, append_eos: bool):
    """A `PreTrainedTokenizerFast` for `tokenizer` with the model's special tokens."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    backend = HFTokenizer.from_str(tokenizer.hf.to_str())
    eos = tokenizer.id_to_token(config.eos_id)
    if append_eos:
        backend.post_processor = processors.TemplateProcessing(
            single=f"$A:0 {eos}:0", pair=f"$A:0 {eos}:0 $B:1 {eos}:1", special_tokens=[(eos, config.eos_id)]
        )
    special = {
        "pad_token": tokenizer.id_to_token(config.pad_id),
        "bos_token": tokenizer.id_to_token(config.bos_id),
        "eos_token": eos,
    }
    if config.unk_id is not None:
        special["unk_token"] = tokenizer.id_to_token(config.unk_id)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=backend, model_max_length=config.max_len, split_special_tokens=True, **special
    )
    for name, token in special.items():  # the tokens must keep their ids: no new ones appended
        if fast.convert_tokens_to_ids(token) != tokenizer.hf.token_to_id(token):
            raise RuntimeError(f"internal error: {name} {token!r} changed id in the Hugging Face tokenizer")
    return fast


def save_hf_tokenizers(source: ExportSource, out: Path) -> None:
    """Write the tokenizer(s) of `source` into the Hugging Face directory `out`."""
    config = source.config
    is_translation = source.model_type == "transformer"
    from aiayn.data.sentencepiece_tokenizer import SentencePieceTokenizer, save_marian_pair

    if isinstance(source.tokenizers.source, SentencePieceTokenizer):
        if not is_translation or source.tokenizers.is_joint:
            raise ConfigError(
                f"{source.directory}: a SentencePiece tokenizer exports only as OPUS-MT's pair "
                "(source.spm, target.spm, vocab.json) of a translation model"
            )
        from transformers import MarianTokenizer

        save_marian_pair(source.tokenizers, out)  # the files MarianTokenizer reads
        files = (str(out / name) for name in ("source.spm", "target.spm", "vocab.json"))
        MarianTokenizer(*files).save_pretrained(out)
        return
    hf_tokenizer(source.tokenizers.source, config, append_eos=is_translation).save_pretrained(out)
    if is_translation and not source.tokenizers.is_joint:
        target = hf_tokenizer(source.tokenizers.target, config, append_eos=False)
        target.save_pretrained(out / TARGET_SUBFOLDER)
