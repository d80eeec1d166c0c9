"""Special token ids, fixed project-wide: every vocabulary starts with these four tokens."""

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
UNK_ID = 3
SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]
