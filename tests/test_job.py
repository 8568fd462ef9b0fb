"""transformer_lib.job: the typed job (task, model, recipe, run options) and its checks."""

import contextlib
import dataclasses
import io
from pathlib import Path

import pytest

from transformer_lib.distributed import ResumeError, setup_distributed
from transformer_lib.job import (
    RunOptions,
    TaskSpec,
    model_config,
    run_settings,
    train_distributed,
)
from transformer_lib.recipe import TrainingConfig


@pytest.mark.parametrize("make, message", [
    (lambda: TaskSpec(name="poetry"), "task must be one of"),
    (lambda: TaskSpec(train_size=0), "train_size must be >= 1"),
    (lambda: TaskSpec(data_seed=-1), "data_seed must be >= 0"),
    (lambda: RunOptions(global_batch_size=0), "global_batch_size must be >= 1"),
    (lambda: RunOptions(resume=True), "resume needs out"),
    (lambda: RunOptions(checkpoint_every=5), "checkpoint_every needs out"),
    (lambda: model_config(TaskSpec(), "huge"), "size must be one of"),
])
def test_bad_fields_are_refused_by_name(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_the_vocabulary_sizes_come_from_the_task():
    reversal, dates = TaskSpec(name="reversal"), TaskSpec(name="dates")
    assert reversal.vocab_sizes() == (20, 20)
    config = model_config(dates, "small")
    assert (config.src_vocab_size, config.tgt_vocab_size) == dates.vocab_sizes() != (20, 20)
    with pytest.raises(ValueError, match="task 'reversal' needs"):
        train_distributed(reversal, config, TrainingConfig(steps=1, warmup=1), RunOptions(),
                          setup_distributed("cpu"))


def test_settings_name_what_a_run_computes_from(tmp_path: Path):
    task = TaskSpec(name="reversal", train_size=100, valid_size=10)
    recipe = TrainingConfig(steps=10, warmup=2)
    settings = run_settings(task, model_config(task), recipe, 32, 2)
    assert settings["task.train_size"] == 100 and settings["model.d_model"] == 32
    assert settings["recipe.warmup"] == 2 and settings["world_size"] == 2
    assert not {"recipe.steps", "recipe.compile", "recipe.progress"} & set(settings)


@pytest.mark.parametrize("schedule", ["linear", "inverse_sqrt", "constant"])
def test_more_steps_are_refused_only_for_the_linear_schedule(tmp_path: Path, schedule):
    """The linear schedule decays over the steps: resumed with more, it would jump."""
    task = TaskSpec(name="reversal", train_size=64, valid_size=8)
    recipe = TrainingConfig(steps=2, warmup=1, schedule=schedule)
    run, ctx = RunOptions(global_batch_size=32, out=tmp_path), setup_distributed("cpu")
    longer, resumed = dataclasses.replace(recipe, steps=4), dataclasses.replace(run, resume=True)
    with contextlib.redirect_stdout(io.StringIO()):
        train_distributed(task, model_config(task), recipe, run, ctx)
        if schedule == "linear":
            with pytest.raises(ResumeError, match="recipe.steps: checkpoint 2, this run 4"):
                train_distributed(task, model_config(task), longer, resumed, ctx)
        else:
            log = train_distributed(task, model_config(task), longer, resumed, ctx)
            assert len(log["loss"]) == 4 and log["stopped_by"] == 0


def test_the_job_dataclasses_are_frozen_and_built_with_keywords():
    import dataclasses
    for make in (lambda: TaskSpec("reversal"), lambda: RunOptions(32), lambda: TrainingConfig(10)):
        with pytest.raises(TypeError, match="positional"):
            make()
    task, run = TaskSpec(name="reversal"), RunOptions(global_batch_size=32)
    for obj, name, value in ((task, "train_size", 5), (run, "log_every", 1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, value)
    assert "recipe.pad_id" not in run_settings(task, model_config(task), TrainingConfig(), 32, 1)
    assert run_settings(task, model_config(task), TrainingConfig(), 32, 1)["model.pad_id"] == 0
