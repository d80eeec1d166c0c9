"""Weight initialisation, in one place.

The paper does not state its initialisation. We follow the common reading of it:
- token embeddings N(0, d_model^-1/2), so that the embeddings scaled by sqrt(d_model)
  (Sec. 3.4) have unit variance; the padding row starts at zero;
- learned position embeddings (the `learned` option of Sec. 3.5) N(0, d_model^-1/2) too;
- every linear map (attention projections, feed-forward layers) Xavier-uniform with zero
  biases, as in the reference implementation (tensor2tensor) and `nn.Transformer`;
- an untied pre-softmax projection N(0, d_model^-1/2), like the embedding it would share
  (a tied one *is* the embedding matrix and is left alone); its bias, if any, zero.
"""

from __future__ import annotations

from torch import nn

from aiayn.model.embeddings import TokenEmbedding
from aiayn.model.positional_encoding import LearnedPositionalEmbedding


def init_weights(model: nn.Module, output_projection: nn.Linear | None = None) -> None:
    """Initialise every embedding and `nn.Linear` in `model` as described above.

    output_projection: the model's pre-softmax projection, if any; tied to an embedding
    (same weight tensor), it is not touched.
    """
    embedding_weights = []
    for module in model.modules():
        if isinstance(module, TokenEmbedding):
            nn.init.normal_(module.weight, mean=0.0, std=module.weight.size(1) ** -0.5)
            if module.pad_id is not None:
                nn.init.zeros_(module.weight[module.pad_id])
            embedding_weights.append(module.weight)
        elif isinstance(module, LearnedPositionalEmbedding):
            nn.init.normal_(module.embedding.weight, mean=0.0, std=module.embedding.weight.size(1) ** -0.5)
        elif isinstance(module, nn.Linear) and module is not output_projection:
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    if output_projection is not None and not any(output_projection.weight is w for w in embedding_weights):
        nn.init.normal_(output_projection.weight, std=output_projection.weight.size(1) ** -0.5)
    if output_projection is not None and output_projection.bias is not None:  # `ModelConfig.output_bias`
        nn.init.zeros_(output_projection.bias)
