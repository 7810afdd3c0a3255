"""The fine-tuning task families, each declared in its own folder (`family.TaskFamily`): the
one list the scripts, the workflows and the exports look a family up in."""

from __future__ import annotations

from bert_tf.checkpoints import hf_export
from bert_tf.errors import UserError
from bert_tf.tasks.classifier.family import CLASSIFIER
from bert_tf.tasks.family import TaskFamily
from bert_tf.tasks.multiple_choice.family import MULTIPLE_CHOICE
from bert_tf.tasks.ner.family import NER
from bert_tf.tasks.squad.family import SQUAD

FAMILIES: tuple[TaskFamily, ...] = (CLASSIFIER, NER, SQUAD, MULTIPLE_CHOICE)


def names(families: tuple[TaskFamily, ...] = FAMILIES) -> list[str]:
    return [family.name for family in families]


def family_named(name: str, flag: str = "--task",
                 families: tuple[TaskFamily, ...] = FAMILIES) -> TaskFamily:
    """The family users call `name` (bert-distill's --task, tasks.json's "type").

    Raises:
      UserError: naming `flag` and the known names.
    """
    for family in families:
        if family.name == name:
            return family
    raise UserError(f"{flag} must be one of {', '.join(names(families))}, got {name!r}")


def multitask_families() -> tuple[TaskFamily, ...]:
    """The families the multi-task mix offers."""
    return tuple(family for family in FAMILIES if family.multitask is not None)


def export_heads() -> dict[str, hf_export.ExportHead]:
    """bert-export-hf's --head choices: pretraining, the families' heads, encoder."""
    heads = [hf_export.PRETRAINING_HEAD, *(family.export_head for family in FAMILIES
                                           if family.export_head is not None),
             hf_export.ENCODER_HEAD]
    return {head.name: head for head in heads}
