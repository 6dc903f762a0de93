"""Workload loaders: the six prompt sets of the study behind one interface.

``load(name, n, seed, dataset_dir, tokenizer)`` returns a :class:`WorkloadSample`
holding ``n`` requests drawn deterministically from ``seed``. Sources are tried
in this order:

1. a local directory (``--dataset-dir``) of JSONL files, one record a line, with
   the field names of the project's offline samples. Per workload the real file
   is tried first, then a labelled stand-in where one exists
   (``instructcoder.jsonl`` then ``instructcoder_editeval.jsonl``; ``aime.jsonl``
   then ``aime24.jsonl``);
2. the Hugging Face hub through ``datasets.load_dataset`` (imported only here;
   its cache and ``HF_DATASETS_OFFLINE`` apply as usual);
3. for GPQA only, synthetic four-choice questions in GPQA's exact template,
   labelled as a synthetic stand-in (GPQA's authors ask that real items not be
   published, so none ship with the project).

Sampling (``selection = "hash"``, the default) ranks every record by
``sha256(f"{seed}:{id}")`` and takes the lowest ``n`` (after the ShareGPT filter):
the same seed gives the same ids whatever the order of the file, removing records
that were not picked leaves the pick unchanged, and a smaller sample is a prefix
of a larger one. Asking for more requests than there are gives all of them; the
caller records ``len(requests)``. ``selection = "study"`` follows the study's
scripts instead (a seeded streaming shuffle, its length filters, padding by
seeded copies): see ``sampling``. ``prompt_form = "study"`` gives the engine the prompt strings
the study's loader of the scenario's vLLM built, tokenised as vLLM tokenises a string
(``prompts.prompt_ids``; the loaders' differences are each workload's ``study_prompts``).

Modules: ``catalog`` declares the workloads, ``prompts`` holds the templates and record parsers,
``sources`` reads files, the hub and stand-ins, ``synthetic`` makes the GPQA stand-in,
``sampling`` orders the records and draws the sample, ``loading`` finds the first source that opens
and draws from it.
All pure Python: no vLLM import. The tokenizer arguments only need
the Hugging Face tokenizer methods used here (``__call__``/``encode`` and
``apply_chat_template``).
"""

from .catalog import WORKLOADS, HubSource, LocalFile, Workload
from .loading import WorkloadSample, WorkloadUnavailable, load
from .prompts import Request, overlap_bleu4, prompt_ids, render_prompt
from .sampling import Prompting, count_tokens
from .sources import WorkloadError
from .synthetic import synthetic_gpqa_records

__all__ = [
    "WORKLOADS",
    "HubSource",
    "LocalFile",
    "Prompting",
    "Request",
    "Workload",
    "WorkloadError",
    "WorkloadSample",
    "WorkloadUnavailable",
    "count_tokens",
    "load",
    "overlap_bleu4",
    "prompt_ids",
    "render_prompt",
    "synthetic_gpqa_records",
]
