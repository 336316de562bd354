"""The zoo of ``benches/models.py``: which models, how each is built (random weights, seeded), its
inputs, and its step (the harness's ``forward_pass`` / ``forward_and_backward_pass``).

Plain data at import (the parent process of ``benches/models.py`` imports this without torch);
``build`` and ``Runner`` import torch, transformers and timm when called.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

MODES = ("inference", "training")

# --------------------------------------------------------------------------------------------
# the zoo: plain data, so the parent process never imports torch


@dataclass(frozen=True)
class Spec:
    name: str
    suite: str  # hf | timm | llm | smoke
    batch_size: int
    cls: str = ""  # transformers model class, or timm model name
    config: str = ""  # transformers config class
    config_kwargs: dict = field(default_factory=dict)
    seq_len: int = 0
    image_size: tuple = ()  # timm: override of the model's input size (smoke only)
    tol_inference: float = 1e-3
    tol_training: float = 1e-2
    larger_multiplier: bool = False  # the harness's use_larger_multiplier_for_smaller_tensor
    use_sgd: bool = False  # the harness's BENCHMARK_USE_SGD
    fp32_only: bool = False
    loss_scale: float = 1.0  # timm: loss = mean(output) * scale
    core: bool = True  # in --set core
    training: bool = True
    vision: bool = False  # a timm model (image input, loss = mean of the output)
    skip_accuracy: bool = False  # the harness's large models: no fp64 reference nor eager rerun fits


def _hf_seq_len(name: str) -> int:
    """The harness's ``get_sequence_length``."""
    if name.startswith("Blenderbot"):
        return 128
    if name.startswith(("GPT2", "Bart", "T5", "PLBart", "MBart")):
        return 1024
    if name in ("AllenaiLongformerBase", "BigBird"):
        return 1024
    if name.startswith("OPT"):
        return 2048
    if name.startswith(("Albert", "Deberta", "Layout", "Electra", "XLNet", "MegatronBert", "Bert", "Roberta")):
        return 512
    if name in ("DistillGPT2", "GoogleFnet", "YituTechConvBert"):
        return 512
    if name == "TrOCRForCausalLM":
        return 256
    if name.startswith("MobileBert"):
        return 128
    return 128


# name: (batch size of the harness's list, divisor of its yaml, in --set core)
_HF = {
    "AlbertForMaskedLM": (8, 2, True),
    "AlbertForQuestionAnswering": (8, 1, False),
    "AllenaiLongformerBase": (8, 2, True),
    "BartForCausalLM": (8, 2, False),
    "BartForConditionalGeneration": (4, 1, True),
    "BertForMaskedLM": (32, 2, True),
    "BertForQuestionAnswering": (32, 1, False),
    "BlenderbotForCausalLM": (32, 8, True),
    "BlenderbotSmallForCausalLM": (256, 1, False),
    "BlenderbotSmallForConditionalGeneration": (128, 1, True),
    "DebertaV2ForMaskedLM": (8, 4, True),
    "DebertaV2ForQuestionAnswering": (8, 1, False),
    "DistilBertForMaskedLM": (256, 2, True),
    "DistilBertForQuestionAnswering": (512, 1, False),
    "DistillGPT2": (32, 2, True),
    "ElectraForCausalLM": (64, 2, True),
    "ElectraForQuestionAnswering": (128, 1, False),
    "GPT2ForSequenceClassification": (8, 2, True),
    "GoogleFnet": (32, 2, True),
    "LayoutLMForMaskedLM": (32, 2, True),
    "LayoutLMForSequenceClassification": (32, 1, False),
    "M2M100ForConditionalGeneration": (64, 4, True),
    "MBartForCausalLM": (8, 2, False),
    "MBartForConditionalGeneration": (4, 1, True),
    "MT5ForConditionalGeneration": (32, 2, True),
    "MegatronBertForCausalLM": (16, 4, True),
    "MegatronBertForQuestionAnswering": (16, 1, False),
    "MobileBertForMaskedLM": (256, 2, True),
    "MobileBertForQuestionAnswering": (256, 1, False),
    "OPTForCausalLM": (4, 2, True),
    "PLBartForCausalLM": (16, 2, False),
    "PLBartForConditionalGeneration": (8, 1, True),
    "PegasusForCausalLM": (128, 4, False),
    "PegasusForConditionalGeneration": (64, 1, True),
    "RobertaForCausalLM": (32, 2, True),
    "RobertaForQuestionAnswering": (32, 1, False),
    "T5ForConditionalGeneration": (8, 2, True),
    "T5Small": (8, 2, True),
    "TrOCRForCausalLM": (64, 2, True),
    "XGLMForCausalLM": (32, 4, True),
    "XLNetLMHeadModel": (16, 2, True),
    "YituTechConvBert": (32, 2, True),
}
# the harness's models named by a hub checkpoint, as config classes with that checkpoint's settings
_HF_EXTRA = {
    "AllenaiLongformerBase": (
        "LongformerForMaskedLM",
        "LongformerConfig",
        dict(
            attention_window=512,
            max_position_embeddings=4098,
            vocab_size=50265,
            type_vocab_size=1,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
        ),
    ),
    "T5Small": ("T5ForConditionalGeneration", "T5Config", {}),  # T5Config's defaults are t5-small
    "DistillGPT2": ("GPT2LMHeadModel", "GPT2Config", dict(n_layer=6)),
    "GoogleFnet": ("FNetForMaskedLM", "FNetConfig", {}),  # fnet-base
    "YituTechConvBert": ("ConvBertForMaskedLM", "ConvBertConfig", {}),  # conv-bert-base
}
_HF_USE_SGD = {
    "AlbertForMaskedLM",
    "BartForCausalLM",
    "ElectraForCausalLM",
    "M2M100ForConditionalGeneration",
    "MBartForCausalLM",
    "OPTForCausalLM",
    "PLBartForCausalLM",
    "PegasusForCausalLM",
    "TrOCRForCausalLM",
    "XGLMForCausalLM",
}


def _hf_spec(name: str) -> Spec:
    bs, div, core = _HF[name]
    # the model class's own config class (``config_class``), with its defaults
    cls, config, kwargs = _HF_EXTRA.get(name, (name, "", {}))
    return Spec(
        name=name,
        suite="hf",
        batch_size=max(bs // div, 1),
        cls=cls,
        config=config,
        config_kwargs=kwargs,
        seq_len=_hf_seq_len(name),
        tol_inference=4e-3 if name == "GPT2ForSequenceClassification" else 1e-3,
        tol_training=2e-2 if name in ("MT5ForConditionalGeneration", "BertForMaskedLM") else 1e-2,
        larger_multiplier=name in ("GPT2ForSequenceClassification", "BertForMaskedLM"),
        use_sgd=name in _HF_USE_SGD,
        fp32_only=name == "GoogleFnet",
        core=core,
        # the harness's only_inference: fails with Dynamo in train mode
        training=name != "M2M100ForConditionalGeneration",
        skip_accuracy=name in ("DebertaV2ForMaskedLM", "BlenderbotForCausalLM"),
    )


# name: (batch size of the harness's list, divisor)
_TIMM = {
    "adv_inception_v3": (128, 1),
    "beit_base_patch16_224": (128, 2),
    "convnextv2_nano.fcmae_ft_in22k_in1k": (128, 1),
    "deit_base_distilled_patch16_224": (128, 2),
    "deit_tiny_patch16_224.fb_in1k": (128, 1),
    "dm_nfnet_f0": (128, 1),
    "ghostnet_100": (512, 1),
    "inception_v3": (128, 1),
    "mobilenetv2_100": (128, 1),
    "mobilenetv3_large_100": (512, 1),
    "mobilevit_s": (128, 2),
    "nfnet_l0": (128, 1),
    "repvgg_a2": (128, 1),
    "swin_base_patch4_window7_224": (128, 2),
    "tf_efficientnet_b0": (128, 1),
    "visformer_small": (128, 1),
    "vit_base_patch14_dinov2.lvd142m": (128, 1),
    "vit_base_patch16_siglip_256": (128, 1),
}


def _timm_spec(name: str) -> Spec:
    bs, div = _TIMM[name]
    if name == "vit_base_patch14_dinov2.lvd142m":
        div = 4  # at 518 x 518 (1370 tokens an image) a training step of 128 does not fit 80 GB
    if name == "beit_base_patch16_224":
        tol = 0.16
    elif name in ("deit_base_distilled_patch16_224", "vit_base_patch16_siglip_256"):
        tol = 0.08
    elif name in ("inception_v3", "mobilenetv3_large_100"):
        tol = 0.04
    else:
        tol = 1e-2
    return Spec(
        name=name,
        suite="timm",
        batch_size=max(bs // div, 1),
        cls=name,
        vision=True,
        tol_training=tol,
        larger_multiplier=name in ("inception_v3", "mobilenetv3_large_100", "vit_base_patch14_dinov2.lvd142m"),
        use_sgd=name in ("adv_inception_v3", "ghostnet_100", "tf_efficientnet_b0"),
        loss_scale=1e-3 if name == "mobilevit_s" else 1.0,
    )


# real widths of each checkpoint's config.json, few layers
_LLM = {
    "Llama-3.2-1B": (
        "LlamaForCausalLM",
        "LlamaConfig",
        dict(
            hidden_size=2048,
            intermediate_size=8192,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=64,
            vocab_size=128256,
            max_position_embeddings=131072,
            rms_norm_eps=1e-5,
            rope_theta=500000.0,
            rope_scaling=dict(
                rope_type="llama3",
                factor=32.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=8192,
            ),
            tie_word_embeddings=True,
            num_hidden_layers=4,
        ),
    ),
    "Qwen3-0.6B": (
        "Qwen3ForCausalLM",
        "Qwen3Config",
        dict(
            hidden_size=1024,
            intermediate_size=3072,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            vocab_size=151936,
            max_position_embeddings=40960,
            rms_norm_eps=1e-6,
            rope_theta=1000000.0,
            tie_word_embeddings=True,
            num_hidden_layers=4,
        ),
    ),
    "Gemma-2-2B": (
        "Gemma2ForCausalLM",
        "Gemma2Config",
        dict(
            hidden_size=2304,
            intermediate_size=9216,
            num_attention_heads=8,
            num_key_value_heads=4,
            head_dim=256,
            vocab_size=256000,
            query_pre_attn_scalar=256,
            sliding_window=4096,
            final_logit_softcapping=30.0,
            attn_logit_softcapping=50.0,
            hidden_activation="gelu_pytorch_tanh",
            num_hidden_layers=4,
        ),
    ),
    "Mistral-7B": (
        "MistralForCausalLM",
        "MistralConfig",
        dict(
            hidden_size=4096,
            intermediate_size=14336,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=128,
            vocab_size=32768,
            max_position_embeddings=32768,
            rms_norm_eps=1e-5,
            rope_theta=1000000.0,
            sliding_window=None,
            num_hidden_layers=2,
        ),
    ),
}


def _llm_spec(name: str) -> Spec:
    cls, config, kwargs = _LLM[name]
    return Spec(name=name, suite="llm", batch_size=2, cls=cls, config=config, config_kwargs=kwargs, seq_len=1024)


_TINY_BERT = dict(vocab_size=256, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
SMOKE = [
    Spec(
        name="tiny_bert",
        suite="smoke",
        batch_size=2,
        cls="BertForMaskedLM",
        config="BertConfig",
        config_kwargs=dict(_TINY_BERT, max_position_embeddings=64),
        seq_len=16,
    ),
    Spec(
        name="tiny_gpt2",
        suite="smoke",
        batch_size=2,
        cls="GPT2LMHeadModel",
        config="GPT2Config",
        config_kwargs=dict(vocab_size=256, n_embd=32, n_layer=1, n_head=2, n_positions=64),
        seq_len=16,
    ),
    Spec(
        name="tiny_llama",
        suite="smoke",
        batch_size=2,
        cls="LlamaForCausalLM",
        config="LlamaConfig",
        config_kwargs=dict(
            vocab_size=256,
            hidden_size=32,
            intermediate_size=64,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_hidden_layers=1,
            max_position_embeddings=64,
        ),
        seq_len=16,
    ),
    Spec(name="tiny_resnet", suite="smoke", batch_size=2, cls="resnet10t", image_size=(3, 32, 32), vision=True),
]

SUITES = ("hf", "timm", "llm")


def zoo(which: str = "core") -> list[Spec]:
    """Every model of the three suites in order (``which``: core or full HF list)."""
    hf = [_hf_spec(n) for n in sorted(_HF)]
    if which == "core":
        hf = [s for s in hf if s.core]
    return hf + [_timm_spec(n) for n in sorted(_TIMM)] + [_llm_spec(n) for n in _LLM]


def find_spec(name: str) -> Spec:
    for s in zoo("full") + SMOKE:
        if s.name == name:
            return s
    raise KeyError(name)


# --------------------------------------------------------------------------------------------
# child: build, check, time one model (torch imported here only)


def _hf_labels(spec: Spec, model: Any, bs: int, seq: int, device: str) -> dict:
    """The harness's loss arguments by the model's name."""
    import torch

    vocab = model.config.vocab_size
    name = spec.name if spec.suite == "hf" else spec.cls

    def ints(high: int, shape: tuple) -> Any:
        return torch.randint(0, max(high, 1), shape, device=device, dtype=torch.int64)

    if name.endswith("QuestionAnswering"):
        return {"start_positions": ints(seq, (bs,)), "end_positions": ints(seq, (bs,))}
    if name.endswith("SequenceClassification"):
        return {"labels": ints(model.config.num_labels - 1, (bs,))}
    if name.endswith("ForConditionalGeneration"):
        return {"labels": ints(vocab - 1, (bs, seq))}
    return {"labels": ints(vocab, (bs, seq))}  # MaskedLM, CausalLM, LMHeadModel, the extra models


def build(spec: Spec, device: str, batch_size: int | None, mode: str) -> tuple[Any, Any]:
    """The fp32 model (random weights, seeded) and its example inputs, on ``device``."""
    import torch

    bs = batch_size or spec.batch_size
    torch.manual_seed(1337)
    if spec.vision:
        import timm
        from timm.data import resolve_data_config

        with torch.device(device):
            model = timm.create_model(
                spec.cls,
                pretrained=False,
                in_chans=3,
                scriptable=False,
                num_classes=None,
                drop_rate=0.0,
                drop_path_rate=None,
                drop_block_rate=None,
            )
        size = spec.image_size or resolve_data_config({}, model=model, use_test_size=mode != "training")["input_size"]
        torch.manual_seed(1337)
        x = torch.randint(256, size=(bs, *size), device=device).to(torch.float32)
        x = (x - x.mean()) / x.std()
        return model, (x,)

    import transformers

    model_cls = getattr(transformers, spec.cls)
    config = (getattr(transformers, spec.config) if spec.config else model_cls.config_class)(**spec.config_kwargs)
    # dropout kept as a kernel that drops nothing (eager and compiled draw different numbers)
    for key, value in config.to_dict().items():
        if "drop" in key and isinstance(value, float):
            setattr(config, key, 1e-30)
    if spec.cls.startswith(("GPT2ForSequenceClassification", "Roberta")):
        config.pad_token_id = 0
    if hasattr(config, "use_cache"):
        config.use_cache = False
    with torch.device(device):
        model = model_cls(config)
    if hasattr(model, "config") and hasattr(model.config, "use_cache"):
        model.config.use_cache = False
    seq = spec.seq_len
    vocab = model.config.vocab_size
    torch.manual_seed(1337)
    if spec.name.startswith("Roberta"):
        ids = torch.randint(0, 1, (bs, seq), device=device, dtype=torch.int64)
    else:
        ids = torch.randint(0, vocab, (bs, seq), device=device, dtype=torch.int64)
    if "Bart" in spec.name and model.config.eos_token_id is not None:
        ids[:, -1] = model.config.eos_token_id
    inputs = {"input_ids": ids}
    if spec.name.startswith(("T5", "M2M100", "MT5")):
        inputs["decoder_input_ids"] = ids
    if spec.suite == "llm":
        if mode == "training":
            inputs["labels"] = ids
    else:
        inputs.update(_hf_labels(spec, model, bs, seq, device))
    return model, inputs


def _cast(x: Any, dtype: Any) -> Any:
    import torch
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t, x)


def _clone(x: Any) -> Any:
    import torch
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, x)


class Runner:
    """The harness's ``forward_pass`` / ``forward_and_backward_pass`` for one model and mode."""

    def __init__(self, spec: Spec, mode: str, device: str, amp: bool) -> None:
        import torch

        self.spec, self.mode, self.device, self.amp = spec, mode, device, amp
        self.optimizer: Any = None

        # the harness's optimizer_zero_grad: never traced (a graph break before the forward)
        def zero_grad(mod: Any) -> None:
            if self.optimizer is not None:
                self.optimizer.zero_grad(True)
            else:
                mod.zero_grad(True)

        self.zero_grad = torch._disable_dynamo(zero_grad, recursive=True)

    def init_optimizer(self, model: Any) -> None:
        import torch

        if self.mode != "training":
            self.optimizer = None
        elif self.device == "cuda" and not self.spec.use_sgd:
            self.optimizer = torch.optim.Adam(model.parameters(), lr=0.01, capturable=True, foreach=True)
        else:
            # the harness's SGD models; on the CPU (no capturable Adam) SGD, compiled with the step
            self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
            if self.device == "cuda":
                self.optimizer.step = torch._dynamo.disable(self.optimizer.step)

    def _call(self, mod: Any, inputs: Any) -> Any:
        return mod(**inputs) if isinstance(inputs, dict) else mod(*inputs)

    def _autocast(self) -> Any:
        import torch

        if self.amp:
            return torch.autocast(device_type=self.device, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def loss(self, pred: Any) -> Any:
        if self.spec.vision:
            from torch._dynamo.testing import reduce_to_scalar_loss

            if isinstance(pred, tuple):
                pred = pred[0]
            return reduce_to_scalar_loss(pred) * self.spec.loss_scale
        return pred[0]

    def forward(self, mod: Any, inputs: Any) -> Any:
        import torch

        with torch.no_grad(), self._autocast():
            out = self._call(mod, inputs)
        return out.logits if self.spec.suite == "llm" else out

    def step(self, mod: Any, inputs: Any) -> Any:
        self.zero_grad(mod)
        with self._autocast():
            loss = self.loss(self._call(mod, inputs))
        loss.backward()
        if self.optimizer is not None:
            self.optimizer.step()
        return loss

    def fn(self) -> Any:
        return self.forward if self.mode == "inference" else self.step

    def results(self, mod: Any, out: Any) -> Any:
        """What accuracy compares: the output (inference), or loss, grads, params, buffers."""
        if self.mode == "inference":
            return out
        from torch._dynamo.testing import collect_results

        return collect_results(mod, None, out, [])

    def run_n(self, mod: Any, inputs: Any, fn: Any, n: int = 2) -> Any:
        """The harness's ``run_n_iterations``: n calls, the last one's results."""
        from torch._dynamo.utils import clone_inputs

        out = None
        for _ in range(n):
            out = fn(mod, clone_inputs(inputs) if isinstance(inputs, dict) else _clone(inputs))
        return self.results(mod, out)
