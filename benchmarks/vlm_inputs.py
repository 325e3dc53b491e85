"""The image-text-to-text task of the sweeps: a vision-language model's shrunk config and inputs.

A VLM's config holds a text model, a vision tower and the projector between them; the
sweep's generic shrinking (``causal_lm_sweep._shrink``) makes both towers 32 wide, and this
module makes what joins them agree: the projector's widths, the count of image tokens a
model expects (Gemma 3's pooled tokens an image, LLaVA-NeXT's tiles), Qwen2.5-VL's window
in pixels, the multimodal rotary sections of Qwen2-VL's and GLM-4V's text models, and the
image and boundary token ids, moved inside the shrunk vocabulary.

The inputs come from the model itself: its ``get_image_features`` is called on a batch of
two images in the layout its signature asks for (one 32 x 32 image, in tiles, or as
Qwen2-VL's flattened patches with their grid), and each text row holds as many image
tokens as that image gave features, between the boundary tokens the config names, after a
left padding (the two rows differ in length where the features do). So a model whose
layout is not one of those skips, as a config the generic shrinking does not fit does.
"""
from __future__ import annotations

import inspect
from typing import Any

import torch
from architectures import sub_configs

#: the widths between a VLM's towers, set where a config (or a sub-config) has them as ints
VLM_SMALL = dict(
    out_hidden_size=32, projection_dim=32, projector_hidden_size=32, text_hidden_size=32, projector_input_dim=32,
    projector_output_dim=32, vision_output_dim=32, projection_hidden_size=32, projection_hidden_dim=32,
    vision_hidden_size=32, encoder_hidden_size=32, word_embed_proj_dim=32, alignment_intermediate_size=64,
    projection_intermediate_size=64,
    # a vision tower's own width (Qwen2-VL's), the largest image one sizes its positions by (HunYuan-VL's)
    embed_dim=32, max_image_size=64,
    # Gemma 3's pooled tokens an image: 4 x 4 of its 8 x 8 patches
    mm_tokens_per_image=16)
#: text tokens are drawn below this id; the image and boundary ids move to TOKEN_BASE and up
TEXT_IDS = 64
TOKEN_BASE = 80
#: the token ids a sweep keeps where _shrink left them (inside the vocabulary already)
_KEEP_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")
#: Qwen2-VL's default multimodal rotary sections (time, height, width), scaled to a shrunk head
_MROPE_SECTION = (16, 24, 24)
#: the grid of patches an image of the flattened-patch layout has (divisible by a 2 x 2 merge)
_GRID = 4


def shrink_multimodal(cfg: Any) -> None:
    """VLM_SMALL's widths on ``cfg`` and its sub-configs, the window, tiles and rotary sections
    made consistent with the shrunk towers, the special token ids moved inside the text
    model's vocabulary (after ``causal_lm_sweep._shrink``)."""
    for c in _configs_of(cfg):
        for k, v in VLM_SMALL.items():
            if isinstance(getattr(c, k, None), int):
                try:
                    setattr(c, k, v)
                except (AttributeError, NotImplementedError):
                    pass
        patch, merge, window = (getattr(c, k, None) for k in ("patch_size", "spatial_merge_size", "window_size"))
        if all(isinstance(x, int) for x in (patch, merge, window)):
            c.window_size = patch * merge * 2  # Qwen2.5-VL's window, in pixels: 2 x 2 merged patches
        if isinstance(getattr(c, "image_grid_pinpoints", None), list):
            size = getattr(getattr(c, "vision_config", None), "image_size", 32)
            c.image_grid_pinpoints = [[size, size]]  # LLaVA-NeXT's any-resolution: one tile
    text = cfg.get_text_config()
    rope = getattr(text, "rope_parameters", None)
    head_dim = getattr(text, "head_dim", None)
    if not isinstance(head_dim, int):
        head_dim = getattr(text, "hidden_size", 32) // getattr(text, "num_attention_heads", 4)
    if isinstance(rope, dict):
        half = int(head_dim * rope.get("partial_rotary_factor", getattr(text, "partial_rotary_factor", 1.0))) // 2
        if half >= len(_MROPE_SECTION):
            rope["mrope_section"] = _sections(half)
    _move_token_ids(cfg, getattr(text, "vocab_size", TOKEN_BASE + 16))


def _configs_of(cfg: Any) -> list[Any]:
    """``cfg`` and every sub-config below it, each once."""
    out, todo = [], [cfg]
    while todo:
        c = todo.pop()
        if any(c is o for o in out):
            continue
        out.append(c)
        todo += sub_configs(c)
    return out


def _sections(half: int) -> list[int]:
    """Qwen2-VL's rotary sections scaled to ``half`` (the rotated half of a head), each at
    least 1, summing to ``half``."""
    total = sum(_MROPE_SECTION)
    s = [max(1, x * half // total) for x in _MROPE_SECTION]
    while sum(s) < half:  # the rest to the section furthest below its share
        i = max(range(len(s)), key=lambda j: _MROPE_SECTION[j] * half / total - s[j])
        s[i] += 1
    return s


def _move_token_ids(cfg: Any, vocab: int) -> None:
    """Each special token id (image, video, boundaries) past the text ids moved to its own id
    from TOKEN_BASE up, the same id wherever a config repeats it."""
    moved: dict[int, int] = {}
    for c in _configs_of(cfg):
        for k, v in list(vars(c).items()):
            if (k.endswith(("_token_id", "_token_index")) and k not in _KEEP_IDS and isinstance(v, int)
                    and not isinstance(v, bool) and v >= TEXT_IDS):
                moved.setdefault(v, TOKEN_BASE + len(moved))
                setattr(c, k, moved[v])
    if TOKEN_BASE + len(moved) > vocab:
        raise ValueError(f"{len(moved)} special token ids do not fit a vocabulary of {vocab}")


def image_token_id(cfg: Any) -> int:
    token = _first_int(cfg, ("image_token_id", "image_token_index"))
    if token is None:
        raise ValueError(f"{type(cfg).__name__} names no image token id")
    return token


def inputs(model: torch.nn.Module, device: str, dtype: torch.dtype, batch: int = 2, pad: int = 3) -> dict[str, Any]:
    """The step's keyword arguments for ``model``: images, token ids with the image tokens
    they need (6 text tokens, the image's, 4 more; the first row ``pad`` text tokens shorter,
    left-padded where the images give as many features), an attention mask, and the ids as
    labels (-100 at the image tokens and the padding); the same every call (a fixed seed)."""
    cfg = model.config
    g = torch.Generator().manual_seed(1)
    images, counts = _images(model, cfg, batch, g, device, dtype)
    token = image_token_id(cfg)
    start = _first_int(cfg, ("vision_start_token_id", "image_start_token_id"))
    end = _first_int(cfg, ("vision_end_token_id", "image_end_token_id"))
    rows = []
    for i, n in enumerate(counts):
        row = torch.randint(3, TEXT_IDS, (6,), generator=g).tolist()[pad if i == 0 else 0:]
        row += ([start] if start is not None else []) + [token] * n + ([end] if end is not None else [])
        rows.append(row + torch.randint(3, TEXT_IDS, (4,), generator=g).tolist())
    length = max(map(len, rows))
    pad_id = getattr(cfg.get_text_config(), "pad_token_id", None) or 0
    ids = torch.full((batch, length), pad_id)
    mask = torch.zeros(batch, length, dtype=torch.long)
    for i, r in enumerate(rows):  # left padding, as a batch of prompts has
        ids[i, length - len(r):] = torch.tensor(r)
        mask[i, length - len(r):] = 1
    labels = ids.masked_fill((ids == token) | (mask == 0), -100)
    kw = dict(images, input_ids=ids, attention_mask=mask, labels=labels)
    if "mm_token_type_ids" in inspect.signature(model.forward).parameters:
        kw["mm_token_type_ids"] = (ids == token).long()  # Qwen2-VL's: 1 at an image's tokens
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}


def _first_int(cfg: Any, names: tuple[str, ...]) -> int | None:
    return next((v for v in (getattr(cfg, k, None) for k in names) if isinstance(v, int)), None)


def _images(model: torch.nn.Module, cfg: Any, batch: int, g: torch.Generator, device: str,
            dtype: torch.dtype) -> tuple[dict[str, Any], list[int]]:
    """(the image arguments, how many features each image gives): the first layout the
    model's ``get_image_features`` accepts, asked in eager without gradients."""
    get = getattr(model, "get_image_features", None) or getattr(getattr(model, "model", None), "get_image_features", None)
    if get is None:
        raise ValueError(f"{type(model).__name__} has no get_image_features to size its image tokens by")
    wants = set(inspect.signature(get).parameters)
    vision = getattr(cfg, "vision_config", None) or cfg
    channels = next((v for v in (getattr(vision, k, None) for k in ("in_channels", "in_chans", "num_channels"))
                     if isinstance(v, int)), 3)
    layouts: list[dict[str, Any]] = []
    if wants & {"image_grid_thw", "image_grid_hw"}:
        # flattened patches (Qwen2-VL): one row per patch of (channels x time x patch x patch)
        patch = vision.patch_size if isinstance(getattr(vision, "patch_size", None), int) else 4
        frames = getattr(vision, "temporal_patch_size", None) or 1
        pv = torch.randn(batch * _GRID * _GRID, channels * frames * patch * patch, generator=g)
        grid = "image_grid_thw" if "image_grid_thw" in wants else "image_grid_hw"
        thw = [1, _GRID, _GRID] if grid == "image_grid_thw" else [_GRID, _GRID]
        layouts.append({"pixel_values": pv, grid: torch.tensor([thw] * batch)})
    else:
        size = getattr(vision, "image_size", 32)
        size = size if isinstance(size, int) else size[0] if isinstance(size, (list, tuple)) else 32
        pv = torch.randn(batch, channels, size, size, generator=g)
        extra: dict[str, Any] = {}
        if "image_sizes" in wants:
            extra["image_sizes"] = torch.tensor([[size, size]] * batch)
        if "pixel_attention_mask" in wants and "spatial_shapes" not in wants:
            # Idefics's images of tiles, each with its mask of real pixels
            extra["pixel_attention_mask"] = torch.ones(batch, 1, size, size, dtype=torch.bool)
            layouts.append({"pixel_values": pv[:, None], **extra})
        else:
            # an image; one tile of it; a base and one tile (LLaVA-NeXT's any-resolution)
            layouts += [{"pixel_values": p, **extra} for p in (pv, pv[:, None], pv[:, None].repeat(1, 2, 1, 1, 1))]
    err: Exception | None = None
    for kw in layouts:
        kw = {k: v.to(device=device, dtype=dtype) if v.is_floating_point() else v.to(device) for k, v in kw.items()}
        try:
            with torch.no_grad():
                feats = get(**kw)
        except Exception as e:  # noqa: BLE001  (the next layout may fit)
            err = err or e
            continue
        return kw, _feature_counts(feats, batch)
    assert err is not None
    raise err


def _feature_counts(feats: Any, batch: int) -> list[int]:
    """Features an image gave: rows of the projected features (a model output's pooled
    output, its last hidden state, a tensor, or one tensor an image)."""
    x = getattr(feats, "pooler_output", None)
    if x is None:
        x = getattr(feats, "last_hidden_state", feats)
    if isinstance(x, (list, tuple)):
        counts = [t.numel() // t.shape[-1] for t in x]
        return counts if len(counts) == batch else [sum(counts) // batch] * batch
    return [x.numel() // x.shape[-1] // batch] * batch
