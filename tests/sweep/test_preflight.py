"""Bad input through the command line: refused before any training, one
clear message naming the key, the value and what is allowed, exit 2, and no
file or folder left that was not there before (results_dir included).

Refusals made before any job starts are checked in this process (the sweep
command's ``main``); a few cases, and those found only when a job loads its
data or Keras, go through the real command line in a subprocess."""
import numpy as np
import pytest
from PIL import Image

from ablation.config import ConfigError, compose_config, validate
from ablation.config.compose import check_group_options
from tests.helpers.archives import make_cifar_archive
from tests.helpers.commands import run_cli, run_in_process
from tests.helpers.paths import ROOT
from tests.helpers.refusals import assert_refused, listing

CASES = {
    "unknown dataset": (["dataset=imagenet22k"],
                        "dataset=imagenet22k is unknown: the dataset options are cifar10, "
                        "cifar100, digits, fashion_mnist, image_folder, mnist"),
    "unknown model": (["model=huge"],
                      "model=huge is unknown: the model options are cait, cait_tiny, keras_io, paper, "),
    "unknown experiment": (["experiment=nope"],
                           "experiment=nope is unknown: the experiment options are "),
    "name escapes results_dir": (["name=../../etc"], "name='../../etc' cannot name a folder "
                                 "(it contains a path separator)"),
    "override with a separator names the job folder": (
        ["+trainer.note=a/b"], "the job folder name 'spt+lsa+temp-s0_+trainer.note=a/b' (run_name "
                               "and the command-line overrides that name it) cannot name a folder"),
    "switch not a boolean": (["lsa=maybe"], "lsa='maybe' is not a boolean: use lsa=true or lsa=false"),
    "patch does not divide image": (["model.patch_size=5"],
                                    "model.patch_size=5 does not divide model.image_size=16"),
    "zero epochs": (["trainer.epochs=0"], "trainer.epochs=0 must be a positive integer"),
    "more attention maps than the report draws": (
        ["diagnostics.attention_maps=40"],
        "diagnostics.attention_maps=40 must be an integer in [0, 32] (the maps the report draws)"),
    "epochs past 32 bits": (["trainer.epochs=99999999999999999999"],
                            "trainer.epochs=99999999999999999999 must be a positive integer "
                            "below 2**31"),
    "name with a bidirectional mark": (["name='a\u202eb'"],
                                       "cannot name a folder (it contains a control, "
                                       "bidirectional or zero-width character)"),
    "name with a zero-width space": (["name='a\u200bb'"], "zero-width character"),
    "results_dir with a tilde": (["results_dir='~/x'"],
                                 "results_dir=~/x: '~' is not expanded in a config value"),
    "PiT pooling an odd grid with SPT": (["model=pit_tiny", "model.image_size=12",
                                          "model.patch_size=4", "spt=true"],
                                         "model=pit_tiny joins 2x2 tokens of its 3x3 grid after stage 1"),
    "Swin's windows not tiling its grid": (["model=swin_tiny", "model.image_size=12"],
                                           "model=swin_tiny's 4x4 windows do not tile its "
                                           "6x6 grid in stage 1"),
    "results_dir with a name past 255 bytes": ([f"results_dir=/tmp/{'a' * 256}"],
                                               "is too long for a folder name (at most 255"),
    "compilation cache not a path": (["gpu.compilation_cache=true"],
                                     "gpu.compilation_cache=True must be a folder path, or null"),
    "compilation cache a file": (["gpu.compilation_cache=README.md"],
                                 "gpu.compilation_cache='README.md' is a file, not a folder"),
    "negative batch": (["trainer.batch_size=-4"], "trainer.batch_size=-4 must be a positive integer"),
    "fractional batch": (["trainer.batch_size=2.5"],
                         "trainer.batch_size=2.5 must be a positive integer"),
    "negative seed": (["seed=-1"], "seed=-1 must be an integer in [0, 2**32)"),
    "seed past 32 bits": (["seed=4294967296"], "seed=4294967296 must be an integer in [0, 2**32)"),
    "zero learning rate": (["trainer.learning_rate=0"],
                           "trainer.learning_rate=0 must be a positive number"),
    "dropout rate of 1.5": (["model.attention_dropout=1.5"],
                            "model.attention_dropout=1.5 must be a rate in [0, 1)"),
    "heads do not divide dim": (["model.key_dim=null", "model.num_heads=5"],
                                "model.num_heads=5 does not divide model.dim=32"),
    "wandb mode": (["wandb.mode=sometimes"],
                   "wandb.mode='sometimes' is not one of online, offline, disabled"),
    "image folder without path": (["dataset=image_folder"],
                                  "dataset=image_folder needs dataset.path="),
    "missing image folder": (["dataset=image_folder", "dataset.path=/no/such/folder"],
                             "dataset.path=/no/such/folder does not exist"),
    "unquoted unicode": (["name=é"], "cannot parse the override 'name=é' (LexerNoViableAlt"),
    "tilde": (["name=~"], "cannot parse the override 'name=~'"),
    "typo in a key": (["trainer.epoch=3"], ("trainer.epoch is not a config key: did you mean "
                                            "trainer.epochs? (to add a new key, use "
                                            "+trainer.epoch=")),
    "missing environment variable": (["name=${oc.env:NOPE_X}"], (
        "name cannot be resolved: KeyError raised while resolving interpolation: "
        "\"Environment variable 'NOPE_X' not found\"")),
    "self reference": (["name=${name}"], "name cannot be resolved: Recursive interpolation"),
}


@pytest.mark.parametrize("overrides, message", CASES.values(), ids=CASES.keys())
def test_bad_value_is_refused_before_training(tmp_path, overrides, message):
    result = run_in_process("experiment=smoke", f"results_dir={tmp_path}/results",
                            "wandb.mode=offline", *overrides)
    assert_refused(result, message, tmp_path)


END_TO_END = ["unknown dataset", "switch not a boolean", "typo in a key", "missing image folder"]


@pytest.mark.slow
@pytest.mark.parametrize("case", END_TO_END)
def test_bad_value_is_refused_by_the_real_command_line(tmp_path, case):
    """The same contract in a process of its own, as a user meets it."""
    overrides, message = CASES[case]
    result = run_cli("experiment=smoke", f"results_dir={tmp_path}/results", "wandb.mode=offline",
                     *overrides)
    assert_refused(result, message, tmp_path)


@pytest.mark.parametrize("overrides, message", [
    (["spt=true,maybe"], "spt='maybe' is not a boolean"),
    (["model=tiny,huge"], "model=huge is unknown: the model options are"),
    (["name=../../etc"], "name='../../etc' cannot name a folder"),
    (["trainer.epoch=3,4"], "trainer.epoch is not a config key: did you mean trainer.epochs?"),
], ids=["switch", "group option", "name", "typo in a swept key"])
def test_bad_value_late_in_a_sweep_stops_it_before_the_first_job(tmp_path, overrides, message):
    result = run_in_process("-m", "experiment=smoke", f"results_dir={tmp_path}/results",
                            "trainer.epochs=1", "lsa=true,false", *overrides)
    assert_refused(result, message, tmp_path)


# Every value has a declared type and range (ablation/config/schema.py): a value
# that breaks it in any job of a sweep stops the sweep before the first job.
TYPED = {
    "label smoothing not a number": ("trainer.label_smoothing=0.1,abc",
                                     "trainer.label_smoothing='abc' must be a number in [0, 1)"),
    "weight decay not a number": ("trainer.weight_decay=0.05,abc",
                                  "trainer.weight_decay='abc' must be a number >= 0"),
    "validation fraction not a number": (
        "dataset.validation_fraction=0.1,abc",
        "dataset.validation_fraction='abc' must be a number in (0, 1)"),
    "mlp units not a list": ("model.mlp_hidden_units=[64],abc",
                             "model.mlp_hidden_units='abc' must be a list of positive integers"),
    "mlp units with a word": ("model.mlp_hidden_units=[64],[64,x]",
                              "model.mlp_hidden_units=[64, 'x'] must be a list of positive"),
    "nan learning rate": ("trainer.learning_rate=0.003,nan",
                          "trainer.learning_rate=nan must be a finite number (not nan or inf)"),
    "infinite weight decay": ("trainer.weight_decay=0,inf",
                              "trainer.weight_decay=inf must be a finite number (not nan or inf)"),
    "negative limit": ("dataset.limit_train=100,-5",
                       "dataset.limit_train=-5 must be a positive integer below 2**31, or null"),
    "zero depth": ("model.depth=2,0", "model.depth=0 must be a positive integer"),
    "zero passes": ("trainer.passes_per_epoch=1,0",
                    "trainer.passes_per_epoch=0 must be a positive integer"),
    "zero probe images": ("diagnostics.probe_images=8,0",
                          "diagnostics.probe_images=0 must be a positive integer"),
    "negative warm-up epochs": ("trainer.warmup_epochs=1,-1",
                                "trainer.warmup_epochs=-1 must be an integer in [0, 2**31), or null"),
    "erasing probability": ("augmentation.random_erasing=0.25,1.5",
                            "augmentation.random_erasing=1.5 must be a probability in [0, 1]"),
    "mixing probability": ("augmentation.mixing.probability=0.5,2",
                           "augmentation.mixing.probability=2 must be a probability in [0, 1]"),
    "unknown policy": ("augmentation.policy=randaugment,autoaugmnet",
                       "augmentation.policy='autoaugmnet' is not one of autoaugment, randaugment"),
    "drop path of 1": ("model.drop_path=0.1,1.0", "model.drop_path=1.0 must be a rate in [0, 1)"),
    "verbose of 3": ("trainer.verbose=0,3", "trainer.verbose=3 is not one of auto, 0, 1, 2"),
    "boolean as a word": ("trainer.checkpoint=true,yes",
                          "trainer.checkpoint='yes' must be true or false"),
    "split seed": ("dataset.split_seed=0,-1",
                   "dataset.split_seed=-1 must be an integer in [0, 2**32)"),
    "unknown model key": ("+model.mlp_units=1,2", "model.mlp_units is not a setting of model"),
}


@pytest.mark.parametrize("override, message", TYPED.values(), ids=TYPED.keys())
def test_a_value_of_the_wrong_type_in_a_later_job_stops_the_sweep_first(tmp_path, override,
                                                                        message):
    result = run_in_process("-m", "experiment=smoke", f"results_dir={tmp_path}/results",
                            "trainer.epochs=1", "dataset.limit_train=64", "dataset.limit_test=32",
                            "wandb.mode=disabled", "report.after_sweep=false", override)
    assert_refused(result, message, tmp_path)


def test_jobs_that_would_share_a_folder_are_refused_naming_what_they_differ_in(tmp_path):
    """Values of a key that is not a setting name no folder of their own: the
    refusal says which key, and how to run both."""
    from ablation.sweep.preflight import apart

    result = run_in_process("-m", "experiment=smoke", f"results_dir={tmp_path}/results",
                            "trainer.pad_batches=true,false")
    assert_refused(result, "two jobs of this sweep would share the folder", tmp_path)
    assert ("they differ only in trainer.pad_batches, which names no folder (not a "
            "setting); run each under its own name=") in result.stderr
    assert apart({"a": 1, "b": {"c": 2}}, {"a": 2, "b": {"c": 3}}) == (
        ": they differ only in a, b.c, which name no folder (not settings); run each under "
        "its own name=")


@pytest.mark.slow
def test_bad_value_late_in_a_sweep_is_refused_by_the_real_command_line(tmp_path):
    result = run_cli("-m", "experiment=smoke", f"results_dir={tmp_path}/results",
                     "trainer.epochs=1", "lsa=true,false", "spt=true,maybe")
    assert_refused(result, "spt='maybe' is not a boolean", tmp_path)


@pytest.mark.slow
def test_class_folder_without_readable_images(tmp_path):
    data = tmp_path / "data"
    (data / "cats").mkdir(parents=True)
    (data / "dogs").mkdir()
    for name in ("a.png", "b.png"):  # two: a class with a single image is refused too
        Image.fromarray(np.zeros((8, 8, 3), "uint8")).save(data / "cats" / name)
    (data / "dogs" / "broken.png").write_bytes(b"\x89PNG not really")
    out = tmp_path / "out"
    result = run_cli("experiment=smoke", f"results_dir={out}", "dataset=image_folder",
                     f"dataset.path={data}")
    assert_refused(result, f"class folder {data}/dogs has no readable images", out)


@pytest.mark.slow
@pytest.mark.parametrize("multirun", [False, True], ids=["single run", "joblib multirun"])
def test_truncated_cifar_archive(tmp_path, multirun):
    """Found only when the job loads its data, after Hydra made its folders:
    those this command created are removed, what was there before is kept.
    The sweep runs two jobs side by side in joblib's workers: both refuse,
    the line is printed once, and neither job's folder is left."""
    archive = tmp_path / "data" / "cifar-10-python.tar.gz"
    archive.parent.mkdir()
    make_cifar_archive(archive, fine=False)
    archive.write_bytes(archive.read_bytes()[:5000])
    out = tmp_path / "out"
    (out / "earlier").mkdir(parents=True)
    (out / "earlier" / "notes.txt").write_text("kept")
    before = listing(tmp_path)
    result = run_cli(*(["-m", "seed=0,1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
                       if multirun else []), "experiment=smoke",
                     f"results_dir={out}", "dataset=cifar10", f"dataset.path={archive}")
    assert_refused(result, "is not a readable cifar-10-batches-py archive", tmp_path, before)
    assert "re-download it or point dataset.path at a good copy" in result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("env, keras_json, message", [
    ({"KERAS_BACKEND": "tensorflw"}, None,
     "KERAS_BACKEND=tensorflw is not a Keras backend: use one of tensorflow, jax, torch"),
    ({"KERAS_BACKEND": "torch"}, None, "KERAS_BACKEND=torch, but torch is not installed"),
    ({"KERAS_BACKEND": "numpy"}, None,
     "KERAS_BACKEND=numpy cannot train (Keras runs only inference on it): use one of"),
    ({}, '["jax"]', "Keras cannot read its settings file"),
    ({}, '{"backend": "TensorFlow"}', "backend 'TensorFlow' in "),
    ({}, '{"backend": ["jax"]}', "backend ['jax'] in "),
], ids=["misspelt", "not installed", "inference only", "keras.json not an object",
        "keras.json, wrong case",
        "keras.json, not a name"])
def test_a_backend_keras_cannot_load_is_refused_before_anything_is_written(
        tmp_path, env, keras_json, message):
    """Keras itself would fail at the first job, in a traceback, after Hydra
    made the job's folder."""
    import importlib.util

    if env.get("KERAS_BACKEND") == "torch" and importlib.util.find_spec("torch"):
        pytest.skip("torch is installed here")
    home = tmp_path / "keras_home"
    home.mkdir()
    if keras_json:
        (home / "keras.json").write_text(keras_json)
    before = listing(tmp_path)
    result = run_cli("experiment=smoke", f"results_dir={tmp_path}/results",
                     env={"KERAS_HOME": str(home), **env})
    assert_refused(result, message, tmp_path, before)


@pytest.mark.parametrize("args, message", [
    (["hydra/launcher=nope"], "hydra/launcher=nope is unknown: the hydra/launcher options are "
                              "basic, joblib"),
    (["-m", "seed=0,1", "dataset=digits,nope"], "dataset=nope is unknown: the dataset options"),
])
def test_unknown_group_options_from_the_config_folder_and_plugins(args, message):
    with pytest.raises(ConfigError, match=message):
        check_group_options(args, ROOT / "conf")
    check_group_options(["-m", "hydra/launcher=joblib", "dataset=digits,cifar10", "seed=0,1"],
                        ROOT / "conf")


# W&B's own limits: checked with the other values, before any job.

W_AND_B = {
    "tag of 65 characters": (["wandb.tags=[ok," + "t" * 65 + "]"],
                             "is 65 characters; W&B allows 1 to 64 characters per tag"),
    "empty tag": (["wandb.tags=[ok,'']"], "wandb.tags holds an empty tag"),
    "project with a slash": (["wandb.project=a/b"],
                             "wandb.project='a/b' cannot name a W&B project: it contains '/'"),
    "project with a colon": (["wandb.project='a:b'"], "it contains ':'"),
    "project with a hash": (["wandb.project='a#b'"], "it contains '#'"),
    "project with a percent": (["wandb.project='a%b'"], "it contains '%'"),
    "project with a question mark": (["wandb.project='a?b'"], "it contains '?'"),
    "project with a backslash": (["wandb.project='a\\\\b'"], "it contains '\\'"),
    "long project": (["wandb.project=" + "p" * 129],
                     "cannot name a W&B project: it is 129 characters (at most 128)"),
    "entity with a slash": (["wandb.entity=me/team"],
                            "wandb.entity='me/team' cannot name a W&B entity: it contains '/'"),
    "group too long": (["wandb.mode=offline", "wandb.group=" + "g" * 129],
                       "wandb.group='gggggggggggggggggggg...gggggggggggggggggggg' (the sweep's "
                       "name unless set) is 129 characters: W&B allows at most 128"),
    "dataset name as a tag": (["wandb.mode=offline", "dataset.name=" + "d" * 70],
                              "dataset.name='ddd"),  # the suite tags runs with it
}


@pytest.mark.parametrize("overrides, message", W_AND_B.values(), ids=W_AND_B.keys())
def test_wandb_limits_are_checked_with_the_config(overrides, message):
    config = compose_config(["experiment=smoke", *overrides])
    with pytest.raises(ConfigError) as refused:
        validate(config)
    assert message in str(refused.value) and len(str(refused.value)) < 400


def test_wandb_limits_allow_what_wandb_allows():
    validate(compose_config(["experiment=smoke", "wandb.tags=[" + "t" * 64 + ",b]",
                             "wandb.project=" + "p" * 128, "wandb.entity=my-team_2",
                             "wandb.group=" + "g" * 128]))
    validate(compose_config(["experiment=smoke", "wandb.project='my project (v2)'"]))
    validate(compose_config(["experiment=smoke", "wandb.mode=disabled",
                             "dataset.name=" + "d" * 70, "wandb.group=" + "g" * 129]))  # no run


@pytest.mark.parametrize("case", ["tag of 65 characters", "project with a slash",
                                  "entity with a slash"])
def test_a_wandb_limit_stops_the_sweep_before_anything_is_written(tmp_path, case):
    overrides, message = W_AND_B[case]
    result = run_in_process("-m", "experiment=smoke", f"results_dir={tmp_path}/results",
                            "trainer.epochs=1", "dataset.limit_train=64",
                            "dataset.limit_test=32", "wandb.mode=disabled",
                            "report.after_sweep=false", "seed=0,1", *overrides)
    assert_refused(result, message, tmp_path)


@pytest.mark.parametrize("flags, message", [
    (["--project", "a/b"], "--project 'a/b' cannot name a W&B project: it contains '/'"),
    (["--project", "p" * 129], "it is 129 characters (at most 128)"),
    (["--entity", "team#1"], "--entity 'team#1' cannot name a W&B entity: it contains '#'"),
], ids=["project with a slash", "project too long", "entity with a hash"])
def test_the_reports_wandb_flags_are_checked_before_anything_is_written(
        four_by_three, capsys, flags, message):
    from ablation.report.__main__ import main as report_main

    before = sorted(p.relative_to(four_by_three) for p in four_by_three.rglob("*"))
    assert report_main([str(four_by_three), "--wandb-mode", "offline", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert sorted(p.relative_to(four_by_three) for p in four_by_three.rglob("*")) == before
