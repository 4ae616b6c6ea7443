"""Distil a BERT teacher into a smaller student with a Trainer subclass (compute_loss override)."""
from dataclasses import dataclass, field

import numpy as np
from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding,
                          HfArgumentParser, TrainingArguments)

from data_utils import load_and_tokenize
from distill_trainer import DistillationTrainer


@dataclass
class DistillArguments:
    teacher_model: str = field(default="textattack/bert-base-uncased-SST-2")
    student_model: str = field(default="google/bert_uncased_L-4_H-256_A-4")
    alpha: float = field(default=0.5)
    temperature: float = field(default=4.0)


def compute_metrics(eval_pred):
    predictions, labels = eval_pred
    return {"accuracy": float((np.argmax(predictions, axis=1) == labels).mean())}


def main():
    parser = HfArgumentParser((DistillArguments, TrainingArguments))
    distill_args, training_args = parser.parse_args_into_dataclasses()
    tokenizer = AutoTokenizer.from_pretrained(distill_args.teacher_model)
    dataset = load_and_tokenize(tokenizer)
    teacher = AutoModelForSequenceClassification.from_pretrained(distill_args.teacher_model, num_labels=2)
    student = AutoModelForSequenceClassification.from_pretrained(distill_args.student_model, num_labels=2)
    teacher.to(training_args.device)
    trainer = DistillationTrainer(
        model=student,
        args=training_args,
        teacher_model=teacher,
        alpha=distill_args.alpha,
        temperature=distill_args.temperature,
        train_dataset=dataset["train"],
        eval_dataset=dataset["validation"],
        data_collator=DataCollatorWithPadding(tokenizer),
        processing_class=tokenizer,
        compute_metrics=compute_metrics,
    )
    trainer.train()
    trainer.evaluate()


if __name__ == "__main__":
    main()
