"""The allowed values of every numeric config field, `(section, key) -> Range`.

`aiayn.training.config` checks each value against its entry as the config is read, so
`--set train.lr=nan` or `model.dropout: 1.5` is a one-line error naming the field. A numeric
field without an entry here fails the tests (`tests/hardening/test_bad_arguments.py`).
"""

from aiayn.ranges import NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, PROBABILITY, Range

RANGES: dict[tuple[str, str], Range] = {
    # data
    ("data", "seed"): NON_NEGATIVE_INT,
    ("data", "num_train"): NON_NEGATIVE_INT,
    ("data", "num_valid"): NON_NEGATIVE_INT,
    ("data", "num_test"): NON_NEGATIVE_INT,
    ("data", "vocab_size"): POSITIVE_INT,
    ("data", "max_sentence_tokens"): POSITIVE_INT,
    ("data", "block_size"): POSITIVE_INT,
    ("data", "stride"): POSITIVE_INT,
    ("data", "valid_fraction"): PROBABILITY,
    # model (ModelConfig fields; vocabulary sizes and special-token ids come from the tokenizer)
    ("model", "d_model"): POSITIVE_INT,
    ("model", "num_heads"): POSITIVE_INT,
    ("model", "num_encoder_layers"): NON_NEGATIVE_INT,
    ("model", "num_decoder_layers"): NON_NEGATIVE_INT,
    ("model", "d_ff"): POSITIVE_INT,
    ("model", "dropout"): PROBABILITY,
    ("model", "attention_dropout"): PROBABILITY,
    ("model", "activation_dropout"): PROBABILITY,
    ("model", "max_len"): POSITIVE_INT,
    ("model", "layer_norm_eps"): POSITIVE,
    # train
    ("train", "max_steps"): POSITIVE_INT,
    ("train", "max_epochs"): POSITIVE_INT,
    ("train", "max_minutes"): POSITIVE,
    ("train", "batch_tokens"): POSITIVE_INT,
    ("train", "accumulate"): POSITIVE_INT,
    ("train", "lr_scale"): POSITIVE,
    ("train", "lr"): POSITIVE,
    ("train", "min_lr"): NON_NEGATIVE,
    ("train", "warmup"): NON_NEGATIVE_INT,  # 'noam' needs >= 1 (checked in config_from_dict)
    ("train", "label_smoothing"): PROBABILITY,
    ("train", "adam_beta1"): PROBABILITY,
    ("train", "adam_beta2"): PROBABILITY,
    ("train", "adam_eps"): POSITIVE,
    ("train", "weight_decay"): NON_NEGATIVE,
    ("train", "clip_grad_norm"): POSITIVE,
    ("train", "threads"): POSITIVE_INT,
    ("train", "seed"): NON_NEGATIVE_INT,
    ("train", "log_every"): POSITIVE_INT,
    ("train", "eval_every"): POSITIVE_INT,
    ("train", "keep_checkpoints"): POSITIVE_INT,
    ("train", "early_stopping_patience"): POSITIVE_INT,
    ("train", "bleu_max_sentences"): NON_NEGATIVE_INT,
    ("train", "bleu_beam"): POSITIVE_INT,
    ("train", "test_max_sentences"): NON_NEGATIVE_INT,
    ("train", "test_beam"): POSITIVE_INT,
    ("train", "test_alpha"): Range(low=0, high=10),
    ("train", "max_bad_steps"): POSITIVE_INT,
}
"""The allowed values of every numeric field (None stays allowed where the field's type has it)."""
