"""The package's shape: imports point one way, the config side loads no Keras,
modules stay small, and one list decides which overrides name a job folder; and
the tests' shape: helpers in tests/helpers/, fixtures in conftest.py, no test
module importing another, every folder of test modules a package."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from ablation.config import compose, folder_suffix
from tests.helpers.paths import ROOT

PACKAGE = ROOT / "ablation"
# The flow of a run, lowest first: a subpackage imports only those before it.
# Below them all, the one door to the file system (ablation/files.py).
LAYERS = ["files", "config", "runtime", "runs", "augment", "model", "data", "train", "job",
          "report", "sweep"]
# A soft prompt, not a rule: a module past it says in its docstring why it is one module.
MAX_LINES = 400


def imported_subpackages(path: Path) -> set[str]:
    """The ``ablation.<subpackage>`` names a module imports, lazily or not."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "ablation" else [
                f"ablation.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found |= {n.split(".")[1] for n in names if n.startswith("ablation.")}
    return found


def test_every_subpackage_is_in_the_layer_order():
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert subpackages == set(LAYERS) - {"files"}
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "files.py"], \
        "every module but the file door belongs to a subpackage"


def test_imports_point_one_way():
    """No subpackage imports one later in the flow: no circles between stages."""
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if here not in LAYERS:
            continue
        for other in imported_subpackages(path) - {here}:
            if other in LAYERS and LAYERS.index(other) > LAYERS.index(here):
                wrong.append(f"{path.relative_to(PACKAGE)} imports ablation.{other}")
    assert not wrong, wrong


def test_hydras_plugins_sit_below_the_sweep():
    """Hydra's plugins (the Slurm launcher, the sweeper) are what the sweep
    launches through: the sweep imports them, they import nothing of the sweep
    or above it."""
    plugins = PACKAGE.parent / "hydra_plugins" / "vit_ablation"
    above = set(LAYERS[LAYERS.index("sweep"):])
    wrong = [f"{path.name} imports ablation.{other}" for path in sorted(plugins.glob("*.py"))
             for other in imported_subpackages(path) & above]
    assert not wrong, wrong


def imported_modules(path: Path) -> dict[str, set[str]]:
    """``ablation.x.y`` module -> the names a module takes from it, lazily or not
    (``from ablation.x import y`` counts as importing ``ablation.x.y`` when that
    is a module)."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("ablation"):
            for alias in node.names:
                sub = PACKAGE.parent / (node.module.replace(".", "/") + f"/{alias.name}.py")
                target = f"{node.module}.{alias.name}" if sub.exists() else node.module
                found.setdefault(target, set()).add(alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("ablation."):
                    found.setdefault(alias.name, set())
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_imports_itself_through_others():
    graph = {module_name(p): {m for m in imported_modules(p) if not m.endswith("__init__")}
             for p in PACKAGE.rglob("*.py")}
    circles = []

    def visit(node, path):
        for nxt in graph.get(node, ()):
            if nxt == path[0]:
                circles.append(" -> ".join([*path, nxt]))
            elif nxt not in path and len(path) < 8:
                visit(nxt, [*path, nxt])

    for start in graph:
        if "." in start.removeprefix("ablation."):    # modules, not package faces
            visit(start, [start])
    assert not circles, sorted(circles)[:5]


def test_no_module_takes_another_modules_private_names():
    taken = [f"{module_name(p)} takes {name} from {source}"
             for p in sorted(PACKAGE.rglob("*.py"))
             for source, names in imported_modules(p).items()
             for name in names if name.startswith("_") and source != module_name(p)]
    assert not taken, taken


def test_modules_are_small_or_say_why():
    long = [f"{p.relative_to(PACKAGE)}: {n} lines" for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES
            and f"over {MAX_LINES} lines"
            not in (ast.get_docstring(ast.parse(p.read_text())) or "")]
    assert not long, long


def test_config_records_preflight_and_report_load_no_keras_tensorflow_or_wandb():
    """In a fresh interpreter: what the command line, the records and the reporter
    need imports none of the heavy libraries (they load only where a job trains)."""
    code = ("import sys, ablation.config, ablation.runs, ablation.runs.record, "
            "ablation.runs.record_schema, ablation.sweep.preflight, ablation.report; "
            "print(sorted(m for m in ('keras', 'tensorflow', 'wandb', 'jax', 'torch') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("override, named", [
    ("trainer.learning_rate=0.1", True),
    ("dataset=digits", True),
    ("+model.extra=1", True),
    ("seed=3", False),
    ("name=other", False),
    ("run_name=mine", False),
    ("experiment=smoke", False),
    ("wandb.mode=disabled", False),
    ("+wandb.tags=[a,b]", False),
    ("report.plots=false", False),
    ("gpu.share_memory=false", False),
    ("diagnostics.probe_images=8", False),
    ("dataset.path=/x", False),
    ("trainer.verbose=0", False),
    ("trainer.data_workers=2", False),
])
def test_only_settings_name_a_job_folder(override, named):
    """One list says which keys are not settings (ablation.config.settings); the job
    folder's name is derived from it, not from a second list in config.yaml."""
    cfg = compose([override], hydra_config=True)
    suffix = folder_suffix(cfg.hydra.job.override_dirname)
    assert (suffix == f"_{override}") if named else suffix == ""
    assert "exclude_keys" not in (PACKAGE.parent / "conf" / "config.yaml").read_text()


TESTS = Path(__file__).resolve().parent


def names_a_test_module(name: str, own: str | None) -> bool:
    """Whether the dotted ``name`` is a test module or conftest, other than ``own``:
    ``test_x``, ``conftest``, ``tests.test_x``, ``tests.report.test_x``,
    ``tests.report.conftest`` (and below them)."""
    parts = name.split(".")
    if parts[0] != "tests":
        parts = parts[:1]        # a bare module: test_x, conftest (hydra.test_utils is none)
    for part in parts[1:] if parts[0] == "tests" else parts:
        if part == "conftest" or part.startswith("test_"):
            return part != own
        if part == "helpers":
            return False
    return False


def imports_of_test_modules(path: Path) -> list[str]:
    """What a file under tests/ imports from a test module or from conftest (its own
    module aside), in its code or in the scripts it runs in a fresh process (string
    constants that parse as Python)."""
    own = path.stem if path.stem.startswith("test_") else None
    source = path.read_text()
    trees = [(ast.parse(source), 0)]   # a tree and its first line's line in the file
    for node in ast.walk(trees[0][0]):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and "import" in node.value:
            try:
                trees.append((ast.parse(node.value), node.lineno - 1))
            except SyntaxError:
                pass
    found = []
    for tree, offset in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                names = [module] if module and not module.startswith("tests") else []
                names += [f"{module}.{a.name}".lstrip(".") for a in node.names
                          if not module or module.startswith("tests")]  # from tests.x import test_y
            else:
                continue
            found += [f"{path.relative_to(TESTS)}:{offset + node.lineno}: {ast.unparse(node)}"
                      for name in names if names_a_test_module(name, own)]
    return found


def test_no_test_imports_another_test_module_or_conftest():
    """Shared helpers are in tests/helpers/, fixtures in conftest.py: a test module
    (and a helper, and conftest itself) imports neither another test module nor
    conftest, at the top, inside a test, or in a script it runs in a subprocess."""
    files = [*TESTS.rglob("test_*.py"), *TESTS.rglob("conftest.py"),
             *(TESTS / "helpers").glob("*.py")]
    wrong = [line for path in sorted(files) for line in imports_of_test_modules(path)]
    assert not wrong, wrong


def test_conftest_holds_fixtures_and_hooks_only():
    """Plain functions belong in tests/helpers/, where tests can import them."""
    plain = [f"{path.relative_to(TESTS)}: {node.name}" for path in sorted(TESTS.rglob("conftest.py"))
             for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)
             and not node.name.startswith("pytest_")
             and not any("fixture" in ast.unparse(d) for d in node.decorator_list)]
    assert not plain, plain
    assert not [p.name for p in (TESTS / "helpers").glob("*.py") if p.name.startswith("test")]


def test_every_folder_of_test_modules_is_a_package():
    """tests/ and each folder below it that holds test modules has an ``__init__.py``:
    pytest then imports them as ``tests.report.test_stats`` and the like, so two
    folders may each hold a ``test_cli.py``, and none of them is put on sys.path
    (where tests/datasets/ or tests/config/ could stand in for another package)."""
    folders = {p.parent for p in TESTS.rglob("test_*.py")} | {TESTS}
    missing = sorted(str(f.relative_to(TESTS.parent)) for f in folders
                     if not (f / "__init__.py").is_file())
    assert not missing, missing
