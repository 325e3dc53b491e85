"""The sweeps' image-text-to-text task (benchmarks/vlm_inputs.py): vision-language models
shrunk with their towers joined, their inputs sized by the model's own image features; a
training step and greedy generate() agree under enable() through the interpreter."""
import re

import pytest
from _util import bench_module

pytest.importorskip("transformers")

G = bench_module("generate_sweep")
S = G.S  # the modules generate_sweep reads (bench_module would load second copies)
V = G.vlm_inputs
TASK = "image-text-to-text"


def _model(name):
    archs = S.architectures(TASK)
    if name not in archs:
        pytest.skip(f"{name} is not in this transformers")
    return S._tiny(*archs[name], "cpu", TASK)


def test_vlm_inputs_hold_one_image_token_per_feature_and_label_only_text():
    """LLaVA: each row holds as many image tokens as its image gives features (64 patches of
    a 32 x 32 image), the first row left-padded; the labels are the ids except at image
    tokens and padding (-100); every id lies inside the shrunk vocabulary."""
    model = _model("llava")
    kw = V.inputs(model, "cpu", S.torch.float32)
    ids, mask, labels = kw["input_ids"], kw["attention_mask"], kw["labels"]
    token = V.image_token_id(model.config)
    feats = model.get_image_features(pixel_values=kw["pixel_values"])
    per_image = V._feature_counts(feats, 2)
    assert per_image == [64, 64]
    assert (ids == token).sum(1).tolist() == per_image
    assert mask[0, :3].sum() == 0 and mask[1].all() and mask.sum(1).tolist() == [71, 74]
    assert ((labels == -100) == ((ids == token) | (mask == 0))).all()
    assert int(ids.max()) < model.config.get_text_config().vocab_size
    out = model(**kw)
    assert S.torch.isfinite(out.loss)


def test_qwen2_vl_gets_flattened_patches_a_grid_boundaries_and_scaled_rotary_sections():
    """Qwen2-VL: flattened patches with their grid (4 x 4 patches, merged 2 x 2: 4 image
    tokens an image), the vision start and end tokens around the image tokens, its token
    types, rotary sections summing to the rotated half of the shrunk head, its vision
    tower's width shrunk with the model (an unshrunk tower made the step minutes long)."""
    model = _model("qwen2_vl")
    cfg = model.config
    kw = V.inputs(model, "cpu", S.torch.float32)
    assert kw["pixel_values"].shape[0] == 2 * 4 * 4 and kw["image_grid_thw"].tolist() == [[1, 4, 4]] * 2
    ids, token = kw["input_ids"], V.image_token_id(cfg)
    assert (ids == token).sum(1).tolist() == [4, 4]
    row = ids[1].tolist()
    first = row.index(token)
    assert row[first - 1] == cfg.vision_start_token_id and row[first + 4] == cfg.vision_end_token_id
    assert (kw["mm_token_type_ids"] == (ids == token)).all()
    text = cfg.get_text_config()
    assert sum(text.rope_parameters["mrope_section"]) == text.hidden_size // text.num_attention_heads // 2
    assert sum(p.numel() for p in model.parameters()) < 200_000


def test_rotary_sections_and_moved_token_ids():
    assert V._sections(64) == [16, 24, 24]  # Qwen2-VL's own
    for half in (3, 4, 8, 20, 32):
        s = V._sections(half)
        assert sum(s) == half and min(s) >= 1, (half, s)

    class Cfg:  # a config as _configs_of finds one (it has to_dict)
        def __init__(self, **kw):
            self.__dict__.update(kw)

        def to_dict(self):
            return dict(self.__dict__)

    cfg = Cfg(image_token_id=151655, vision_start_token_id=151652, pad_token_id=0,
              text_config=Cfg(image_token_id=151655, eos_token_id=2, vocab_size=96))
    V._move_token_ids(cfg, 96)
    assert cfg.image_token_id == cfg.text_config.image_token_id == V.TOKEN_BASE  # one id, moved once
    assert cfg.vision_start_token_id == V.TOKEN_BASE + 1 and cfg.pad_token_id == 0 and cfg.text_config.eos_token_id == 2
    with pytest.raises(ValueError, match="do not fit a vocabulary of 81"):
        V._move_token_ids(Cfg(image_token_id=999, video_token_id=998), 81)


def test_a_model_without_image_features_is_a_skip_that_says_why(capsys):
    """A model whose images the recipe cannot size (no ``get_image_features``) reads as a
    skip naming the reason, not as a failure of enable()."""
    class NoFeatures(S.torch.nn.Module):
        config = None

    with pytest.raises(ValueError, match="NoFeatures has no get_image_features"):
        V._images(NoFeatures(), None, 2, S.torch.Generator(), "cpu", S.torch.float32)


@pytest.mark.parametrize("model", ["llava", "qwen2_vl", "gemma3"])
def test_vlm_training_step_agrees_under_enable(capsys, model):
    if model not in S.architectures(TASK):
        pytest.skip(f"{model} is not in this transformers")
    assert S.main(["--task", TASK, "--models", model]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"\| {model} \| ok \| .*, [1-9]\d* launches \(", out), out


def test_vlm_generate_agrees_under_enable(capsys):
    """Greedy decoding after an image: the prefill merges the image features, then one-token
    steps read the cache (Qwen2-VL's multimodal positions continue past the image)."""
    if "qwen2_vl" not in S.architectures(TASK):
        pytest.skip("qwen2_vl is not in this transformers")
    assert G.main(["--task", TASK, "--models", "qwen2_vl", "--tokens", "3"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\| qwen2_vl \| ok \| logits \S+, tokens same 100%, [1-9]\d* launches", out), out
