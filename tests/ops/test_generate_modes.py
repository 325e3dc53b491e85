"""generate() beyond greedy decoding of one prompt, under enable() against eager (fp32, on
the backend of the machine: the interpreter on a CPU): a left-padded batch with its
attention mask, top-k/top-p and min-p sampling (sorts, cumulative sums, scatters and
multinomial draws over the logits), beam search (log-softmax, top-k over beams x vocab,
reordering of the KV cache) and the repetition and n-gram penalties (gathers and scatters
into the scores). Same seed on both sides: the same tokens, the same scores. Two vocabularies:
a tiny one, and one whose masked logits take the softmax kernel's long-row (online) path,
where top-k sampling had given NaN probabilities."""
from __future__ import annotations

import pytest
import torch
import tritonjit_ops as T
from _util import tiny_model

tf = pytest.importorskip("transformers")

V, N = 97, 4
MODES = {
    "greedy": dict(do_sample=False),
    "top_k_top_p": dict(do_sample=True, top_k=20, top_p=0.9, temperature=0.7),
    "min_p": dict(do_sample=True, min_p=0.05, temperature=1.3),
    "beam": dict(do_sample=False, num_beams=3),
    "penalties": dict(do_sample=False, repetition_penalty=1.3, no_repeat_ngram_size=2),
}


#: a vocabulary past one softmax tile of the interpreter's kernel (1024: its long-row path, as
#: a real vocabulary is on a GPU) and past the rows tritonjit's sort and topk take (4096: aten's plan)
LARGE_V = 5000


@pytest.fixture(scope="module", params=[V, LARGE_V], ids=["vocab 97", "vocab 5000"])
def llama(request):
    model = tiny_model("LlamaForCausalLM", "LlamaConfig", dict(
        vocab_size=request.param, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, pad_token_id=0), "sdpa")
    return model.eval()


def _prompt() -> tuple[torch.Tensor, torch.Tensor]:
    """Three prompts of 6 tokens, two of them left-padded (3 and 2 pads)."""
    ids = torch.randint(3, V, (3, 6), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    mask[2, :2] = 0
    return ids.masked_fill(mask == 0, 0), mask


@pytest.mark.parametrize("mode", list(MODES))
def test_generate_mode_agrees_with_eager(llama, mode):
    ids, mask = _prompt()
    cfg = tf.GenerationConfig(max_new_tokens=N, min_new_tokens=N, pad_token_id=0, eos_token_id=None, bos_token_id=1,
                              output_scores=True, return_dict_in_generate=True, **MODES[mode])

    def generate():
        torch.manual_seed(7)  # the sampling modes draw from torch's generator: the same draws on both sides
        with torch.no_grad():
            out = llama.generate(ids, attention_mask=mask, generation_config=cfg)
        return out.sequences, torch.stack(out.scores)

    ref_tokens, ref_scores = generate()
    with T.enable():
        tokens, scores = generate()
    assert torch.equal(tokens, ref_tokens)
    # the processed scores: -inf where a filter removed a token, on both sides
    assert torch.equal(torch.isinf(scores), torch.isinf(ref_scores))
    finite = torch.isfinite(ref_scores)
    torch.testing.assert_close(scores[finite], ref_scores[finite], rtol=1e-4, atol=1e-5)
