"""A transformer decoder built from an encoder, reading a memory of vectors through cross-attention
(:class:`TransformerDecoder`).

TSDAE (Wang et al. 2021, section 3; thesis 2.4.6, 5.4.1) decodes from the pooled sentence vector with every weight
tied to the encoder, as sentence-transformers' ``DenoisingAutoEncoderLoss``; Nugget (Qin & Van Durme 2023, section
3) and PaSeR (Wu et al. 2023, section 3) decode from other memories with a decoder that shares less. The sharing
modes, the memory bias (Nugget eq. 5) and the deviations from sentence-transformers: docs/methods/tsdae.md, section
"TSDAE", subsection "Transformer decoder".
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

import torch
from torch import nn

from .backbone import quiet_transformers

logger = logging.getLogger(__name__)

SHARING = ("all", "embeddings")
IGNORED_LABEL = -100


@dataclass
class DecoderOutput:
    """What :class:`TransformerDecoder` returns: the predictions of the target tokens and their loss."""

    logits: torch.Tensor  # [b, t - 1, vocabulary]: predictions of target tokens 1 .. t-1
    loss: torch.Tensor  # scalar: mean cross-entropy over the non-padding target tokens


def _replace_parameter(module: nn.Module, dotted_name: str, parameter: nn.Parameter) -> None:
    owner_name, _, leaf = dotted_name.rpartition(".")
    owner = module.get_submodule(owner_name) if owner_name else module
    setattr(owner, leaf, parameter)


class TransformerDecoder(nn.Module):
    """A causal language model with cross-attention to a memory (e.g. Hugging Face's ``BertLMHeadModel``)."""

    def __init__(self, language_model: nn.Module):
        super().__init__()
        self.language_model = language_model

    @classmethod
    def from_encoder(
        cls,
        encoder: nn.Module,
        *,
        share: str = "all",
        num_layers: int | None = None,
        backbone: str | None = None,
        fresh_layers: bool = False,
    ) -> TransformerDecoder:
        """A decoder of ``encoder``'s architecture (a Hugging Face transformer, e.g. ``SentenceEncoder.transformer``).

        ``num_layers`` keeps only the bottom layers; ``backbone`` (the encoder's checkpoint folder) also loads a
        pretrained language-model head when the checkpoint has one, as sentence-transformers does; without it the
        head is freshly initialised. ``fresh_layers`` (with ``share="embeddings"``) initialises the transformer
        layers randomly instead of copying them (PaSeR: "the weights of the generative decoder are randomly
        initialized"); the shared word embeddings stay. Fresh weights (cross-attention, a new head, fresh layers)
        consume torch's global RNG.
        """
        from transformers import AutoModelForCausalLM

        if share not in SHARING:
            raise ValueError(f"share must be one of {SHARING}, got {share!r}")
        if fresh_layers and share != "embeddings":
            raise ValueError("fresh_layers needs share='embeddings' (with share='all' the layers are the encoder's)")
        encoder = getattr(encoder, "base_model", encoder)
        config = copy.deepcopy(encoder.config)
        config.is_decoder = True
        config.add_cross_attention = True
        config.tie_word_embeddings = True
        if num_layers is not None:
            if not 1 <= num_layers <= config.num_hidden_layers:
                raise ValueError(f"num_layers must be in 1..{config.num_hidden_layers}, got {num_layers}")
            config.num_hidden_layers = num_layers
        with quiet_transformers():  # the missing cross-attention weights are reported as newly initialised
            if backbone is not None:
                language_model = AutoModelForCausalLM.from_pretrained(
                    backbone, config=config, use_safetensors=True, dtype=torch.float32
                )
            else:
                language_model = AutoModelForCausalLM.from_config(config)
        language_model.to(next(encoder.parameters()).device)
        base = language_model.base_model
        encoder_parameters = dict(encoder.named_parameters())
        if share == "all":
            fresh = []
            for name, _ in list(base.named_parameters()):
                if name in encoder_parameters:
                    _replace_parameter(base, name, encoder_parameters[name])
                else:
                    fresh.append(name)
            logger.debug("decoder shares the encoder's weights; %d fresh tensors (cross-attention)", len(fresh))
        else:
            # Start from the encoder's current weights (it may have been trained since it was loaded), then share
            # only the word embeddings.
            base.load_state_dict(encoder.state_dict(), strict=False)
            if fresh_layers:
                base.encoder.apply(language_model._init_weights)
            base.get_input_embeddings().weight = encoder.get_input_embeddings().weight
        language_model.get_output_embeddings().weight = encoder.get_input_embeddings().weight
        return cls(language_model)

    @property
    def pad_token_id(self) -> int | None:
        return getattr(self.language_model.config, "pad_token_id", None)

    @staticmethod
    def cross_attention_mask(
        memory_mask: torch.Tensor, target_length: int, memory_bias: torch.Tensor, dtype: torch.dtype
    ) -> torch.Tensor:
        """``[b, 1, target_length, m]`` additive mask: ``memory_bias`` on memory vectors, the dtype's minimum on
        padding (``memory_mask`` 0)."""
        blocked = torch.zeros(memory_mask.shape, dtype=dtype, device=memory_mask.device)
        blocked = blocked.masked_fill(memory_mask == 0, torch.finfo(dtype).min)
        additive = torch.where(memory_mask.bool(), memory_bias.to(dtype), blocked)
        return additive[:, None, None, :].expand(-1, 1, target_length, -1)

    def _inputs(
        self,
        memory: torch.Tensor,
        input_ids: torch.Tensor,
        memory_mask: torch.Tensor | None,
        attention_mask: torch.Tensor | None,
        memory_bias: torch.Tensor | None,
    ) -> dict:
        if memory.dim() == 2:
            memory = memory[:, None]
        if memory_mask is None:
            memory_mask = torch.ones(memory.shape[:2], dtype=torch.long, device=memory.device)
        encoder_mask: torch.Tensor = memory_mask
        if memory_bias is not None:
            if memory_bias.shape != memory.shape[:2]:
                raise ValueError(
                    f"memory_bias must be [batch, memory] = {tuple(memory.shape[:2])}, got {tuple(memory_bias.shape)}"
                )
            encoder_mask = self.cross_attention_mask(memory_mask, input_ids.shape[1], memory_bias, memory.dtype)
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "encoder_hidden_states": memory,
            "encoder_attention_mask": encoder_mask,
            "use_cache": False,
            "return_dict": True,
        }

    def logits(
        self,
        memory: torch.Tensor,
        input_ids: torch.Tensor,
        memory_mask: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        memory_bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``[b, t, vocabulary]`` next-token logits of ``input_ids`` (causal), each position cross-attending to the
        ``memory`` ``[b, m, d]`` (or ``[b, d]``: one vector) where ``memory_mask`` ``[b, m]`` is 1, with
        ``memory_bias`` ``[b, m]`` added to the cross-attention logits."""
        return self.language_model(**self._inputs(memory, input_ids, memory_mask, attention_mask, memory_bias)).logits

    def hidden_states(
        self,
        memory: torch.Tensor,
        input_ids: torch.Tensor,
        memory_mask: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        memory_bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``[b, t, d]`` last hidden states of the decoder (before the language-model head), as :meth:`logits`; for
        losses that compute logits only where they are scored."""
        inputs = self._inputs(memory, input_ids, memory_mask, attention_mask, memory_bias)
        return self.language_model.base_model(**inputs).last_hidden_state

    def forward(
        self,
        memory: torch.Tensor,
        target_ids: torch.Tensor,
        memory_mask: torch.Tensor | None = None,
        target_mask: torch.Tensor | None = None,
        memory_bias: torch.Tensor | None = None,
    ) -> DecoderOutput:
        """Teacher forcing: tokens ``target_ids[:, :-1]`` predict ``target_ids[:, 1:]``. ``target_mask`` (1 on real
        tokens; default: ids that are not the pad id) keeps padding out of attention and loss."""
        if target_mask is None:
            pad_id = self.pad_token_id
            target_mask = (target_ids != pad_id).long() if pad_id is not None else torch.ones_like(target_ids)
        logits = self.logits(memory, target_ids[:, :-1], memory_mask, target_mask[:, :-1], memory_bias)
        labels = target_ids[:, 1:].masked_fill(target_mask[:, 1:] == 0, IGNORED_LABEL)
        loss = nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORED_LABEL
        )
        return DecoderOutput(logits=logits, loss=loss)
