"""Generation: seeded, bounded, stoppable, streamed, and past the trained context."""

import pytest
import torch

import aiayn
from aiayn import formats
from aiayn.core.errors import CheckpointError, ConfigError
from aiayn.data.tokenizer import Tokenizer
from aiayn.inference import Generator, TorchGenerator, context_length, stream_text
from aiayn.model import DecoderOnlyLM, ModelConfig

PROMPT = [5, 9, 4]
CHARS = Tokenizer.train("char", ["abcdefghij klmnop"])  # 4 specials + 17 characters: fits 30 ids


def generate_stream(model: DecoderOnlyLM, prompt_ids, *args, **kwargs):
    return TorchGenerator(model, CHARS).generate_ids(prompt_ids, *args, **kwargs)


def generate(model: DecoderOnlyLM, prompt_ids, *args, **kwargs) -> list[int]:
    return list(generate_stream(model, prompt_ids, *args, **kwargs))


def tiny_lm(seed: int = 0, block_size: int = 8) -> DecoderOnlyLM:
    torch.manual_seed(seed)
    config = ModelConfig.tiny(
        vocab_size=30, d_model=32, d_ff=64, num_decoder_layers=2, max_len=16, extra={"block_size": block_size}
    )
    return DecoderOnlyLM(config).eval()


@pytest.fixture(scope="module")
def lm():
    return tiny_lm()


def test_the_context_is_the_trained_block_size(lm):
    assert context_length(lm.config) == 8
    assert context_length(tiny_lm(block_size=64).config) == 16  # never beyond the positional table


def test_same_seed_same_tokens(lm):
    first = generate(lm, PROMPT, 20, temperature=1.5, seed=7, stop_ids=())
    torch.manual_seed(123)  # the global RNG plays no part
    assert generate(lm, PROMPT, 20, temperature=1.5, seed=7, stop_ids=()) == first
    others = [generate(lm, PROMPT, 20, temperature=1.5, seed=s, stop_ids=()) for s in range(3)]
    assert any(other != first for other in others)


@pytest.mark.parametrize("count", [0, 1, 6, 7, 25])
def test_max_new_tokens_is_respected_past_the_context(lm, count):
    # The context is 8 positions: 25 tokens need several refills of the cache.
    assert len(generate(lm, PROMPT, count, temperature=2.0, seed=1, stop_ids=())) == count


def test_generation_stops_after_a_stop_token(lm):
    free = generate(lm, PROMPT, 20, temperature=2.0, seed=3, stop_ids=())
    stop = free[12]  # past the first refill
    stopped = generate(lm, PROMPT, 20, temperature=2.0, seed=3, stop_ids=[stop])
    assert stopped == free[: free.index(stop) + 1]


def test_streaming_yields_the_same_tokens_one_at_a_time(lm):
    stream = generate_stream(lm, PROMPT, 15, temperature=1.0, top_k=10, top_p=0.9, seed=5, stop_ids=())
    streamed = [next(stream)]  # tokens come before the generation is over
    streamed += list(stream)
    assert streamed == generate(lm, PROMPT, 15, temperature=1.0, top_k=10, top_p=0.9, seed=5, stop_ids=())


def naive_greedy(model: DecoderOnlyLM, prompt: list[int], count: int, context: int) -> list[int]:
    """Greedy decoding without a cache, with the same refill rule (keep context // 2)."""
    history, out, keep = list(prompt), [], context
    while len(out) < count:
        window = history[-keep:]
        for _ in range(min(count - len(out), context - len(window) + 1)):
            with torch.no_grad():
                token = int(model(torch.tensor([window]))[0, -1].argmax())
            out.append(token)
            history.append(token)
            window = [*window, token]
        keep = context // 2
    return out


def test_cached_generation_matches_full_recomputation(lm):
    expected = naive_greedy(lm, PROMPT, 20, context=8)
    assert generate(lm, PROMPT, 20, temperature=0.0, stop_ids=()) == expected
    from_bos = naive_greedy(lm, [lm.config.bos_id], 5, context=8)
    assert generate(lm, [], 5, temperature=0.0, stop_ids=()) == from_bos


def test_stream_text_never_splits_a_character():
    text = "naïve café — 東京 🙂 " * 20
    tokenizer = Tokenizer.train("byte_bpe", [text], vocab_size=300)
    ids = [i for char in text for i in tokenizer.encode(char)]  # many multi-token characters
    assert any(len(tokenizer.encode(char)) > 1 for char in text)
    pieces = list(stream_text(tokenizer, ids))
    assert "".join(pieces) == tokenizer.decode(ids) == text
    assert not any("\ufffd" in piece for piece in pieces)


def test_text_generation_is_the_decoded_ids(lm):
    generator = TorchGenerator(lm, CHARS)
    assert isinstance(generator, Generator)
    prompt = "abc"
    ids = generate(lm, CHARS.encode(prompt), 12, temperature=1.0, seed=4)
    text = generator.generate(prompt, 12, temperature=1.0, seed=4)
    assert text == CHARS.decode([i for i in ids if i != lm.config.eos_id])
    assert "".join(generator.generate_stream(prompt, 12, temperature=1.0, seed=4)) == text


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"temperature": -1.0}, "temperature"), ({"top_p": 0.0}, "top_p"), ({"top_k": -2}, "top_k"),
     ({"max_new_tokens": -1}, "max_new_tokens")],
)
def test_bad_sampling_settings_are_refused(lm, settings, message):
    with pytest.raises(ConfigError, match=message):
        TorchGenerator(lm, CHARS).generate("ab", **settings)


def test_load_gives_a_generator_for_a_language_model(lm, tmp_path):
    formats.save_pretrained(lm, tmp_path)
    CHARS.save(tmp_path / "tokenizer.json")
    generator = aiayn.load(tmp_path, "cpu")
    assert isinstance(generator, TorchGenerator) and generator.directory == tmp_path
    greedy = TorchGenerator(lm, CHARS).generate("ab", 5, temperature=0.0)
    assert generator.generate("ab", 5, temperature=0.0) == greedy
    with pytest.raises(CheckpointError, match="translation model"):
        aiayn.load(tmp_path, "cpu", task="translation")
