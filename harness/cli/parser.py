"""The argument parser of the ``harness`` command line: every command, its flags and their help texts."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..leaderboard.formats import BUILTIN_FORMATS as FORMATS
from ..profiles import PROFILES
from . import plot_training
from .common import DEFAULT_LEADERBOARDS, DEFAULT_PUBLISHED, DEFAULT_RESULTS
from .results import add_results_parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness", description="Benchmark harness for sentence-embedding methods.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug output")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    parser.add_argument("--version", action="store_true", help="print the harness version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    commands.add_parser("list", help="list model and task plugins, their packages and plugins that failed to load")

    describe = commands.add_parser("describe", help="show a model's or task's metadata and options")
    describe.add_argument("name")

    run = commands.add_parser("run", help="train what needs training, evaluate, store and print results")
    run.add_argument("--models", help="comma-separated model specs, e.g. be,ce or be:pooling=cls")
    run.add_argument("--tasks", help="comma-separated tasks or task families, e.g. senteval")
    run.add_argument("--matrix", type=Path, help="a YAML matrix file (models, tasks, seeds, ...)")
    run.add_argument("--seeds", default=None, help="comma-separated seeds (default 42)")
    run.add_argument("--backbone", default=None, help="Hugging Face id or local folder (default: the profile's)")
    run.add_argument("--profile", default=None, help=f"budget profile: {', '.join(PROFILES)} (default quick)")
    run.add_argument("--train-on", default=None, help="training source task for trainable models, e.g. stsb")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="budget_set",
        help="training budget for every trained spec: epochs, max_steps, batch_size, learning_rate, "
        "max_train_examples, seed_trials, precision, group_by_length (repeatable; enters the spec hash), "
        "e.g. --set epochs=5",
    )
    run.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    run.add_argument(
        "--executor",
        default="local",
        help="where cells run: local (this process, the default), ray (tasks on a Ray cluster; "
        "pip install 'sentence-harness[ray]') or slurm (a SLURM job array, one task per model and seed; "
        "docs/scaling.md)",
    )
    run.add_argument(
        "--ray-address",
        default=None,
        help="with --executor ray: the cluster (default: join this machine's, else start one; local: "
        "always start one; auto; host:port; ray://host:port)",
    )
    run.add_argument(
        "--gpus-per-task",
        type=float,
        default=None,
        help="with --executor ray: GPUs per training or evaluation task (default 1 if the cluster has GPUs, else 0)",
    )
    run.add_argument(
        "--cpus-per-task",
        type=float,
        default=1.0,
        help="with --executor ray: CPUs per task, also its PyTorch threads (default 1)",
    )
    add_slurm_options(run)
    run.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"working result store (default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR)",
    )
    run.add_argument("--data-dir", type=Path, default=None, help="folder with datasets (or HARNESS_DATA_DIR)")
    run.add_argument(
        "--batch-size", type=int, default=None, help="encoding batch size for evaluation (default: the profile's)"
    )
    run.add_argument(
        "--runtime",
        default="torch",
        help="how models evaluate their encoders: torch (default), onnx (ONNX Runtime on the CPU) or onnx-int8 "
        "(its dynamic int8 quantisation: faster, slightly lower scores, its own cells and leaderboard rows); onnx "
        "ones need pip install 'sentence-harness[onnx]'; models without it are refused",
    )
    run.add_argument(
        "--log-to",
        default=None,
        help="experiment trackers to report training and scores to: tensorboard, mlflow, wandb (comma-separated), "
        "all (every installed one) or none; default the matrix's log_to, else HARNESS_LOG_TO",
    )
    run.add_argument(
        "--overwrite",
        action="store_true",
        help="recompute every cell and retrain every checkpoint, replacing what is stored",
    )
    run.add_argument(
        "--no-embedding-cache",
        action="store_true",
        help="encode every text again instead of serving vectors computed before from the store's embedding cache "
        "(on by default; also HARNESS_EMBEDDING_CACHE=0 or the matrix key embedding_cache: false)",
    )
    run.add_argument(
        "--store-only",
        action="store_true",
        help="compute nothing: answer every cell from the store, or stop and say which cells cannot be",
    )
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument(
        "--leaderboards", type=Path, default=None, help="also rebuild leaderboards into this folder after the run"
    )

    rescore = commands.add_parser(
        "rescore",
        help="recompute the evaluation of stored cells from their stored checkpoints (adds per-example "
        "data to old records); trains nothing",
        parents=[run],
        add_help=False,
        conflict_handler="resolve",
    )
    rescore.set_defaults(overwrite=False)

    compare = commands.add_parser(
        "compare",
        help="paired significance test of model A vs model B on the same test "
        "examples (bootstrap interval, p-value, Holm across tasks)",
    )
    compare.add_argument("model_a", metavar="A", help="a model spec as for `harness run`, e.g. be")
    compare.add_argument("model_b", metavar="B", help="another model spec, e.g. be:pooling=cls")
    compare.add_argument("--tasks", required=True, help="comma-separated tasks or task families, e.g. stsb,senteval")
    compare.add_argument("--seeds", default=None, help="comma-separated seeds to pool (default 42)")
    compare.add_argument("--profile", default="quick", help=f"as given to `harness run`: {', '.join(PROFILES)}")
    compare.add_argument("--backbone", default=None, help="as given to `harness run` (default: the profile's)")
    compare.add_argument("--train-on", default=None, help="as given to `harness run`, e.g. stsb")
    for side in ("a", "b"):
        compare.add_argument(
            f"--train-on-{side}",
            default=None,
            help=f"{side.upper()}'s own training source, replacing --train-on for {side.upper()} only; `none`: "
            f"{side.upper()} untrained (e.g. `harness compare cbe be --train-on-a stsb --train-on-b none`)",
        )
    compare.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"store to read (default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR)",
    )
    compare.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    compare.add_argument(
        "--runtime-a",
        default="torch",
        help="the runtime A's cells were evaluated under (default torch): compare a spec with itself under two "
        "runtimes, e.g. `harness compare be be --runtime-b onnx-int8`, to see a variant's quality drop and speed-up",
    )
    compare.add_argument(
        "--runtime-b", default="torch", help="the runtime B's cells were evaluated under (default torch)"
    )
    compare.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")

    validate = commands.add_parser("validate", help="check specs or a matrix without running anything")
    validate.add_argument("--models")
    validate.add_argument("--tasks")
    validate.add_argument("--matrix", type=Path)
    validate.add_argument("--profile", default=None)
    validate.add_argument("--train-on", default=None)
    validate.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="budget_set")
    validate.add_argument("--backbone", default=None)
    validate.add_argument("--data-dir", type=Path, default=None)
    validate.add_argument("--runtime", default="torch")
    validate.add_argument(
        "--executor",
        default="local",
        help="also check an executor: slurm (sbatch answers, and a probe job sees the store at --results)",
    )
    validate.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"the store the run would use (default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR)",
    )
    add_slurm_options(validate)

    slurm_task = commands.add_parser(
        "slurm-task", help="run one job file of `harness run --executor slurm` (what each SLURM array task runs)"
    )
    slurm_task.add_argument("job_file", type=Path, help="a job file under <store>/slurm/")

    data = commands.add_parser("data", help="list or download datasets that plugins offer")
    data_commands = data.add_subparsers(dest="data_command", metavar="ACTION")
    data_commands.add_parser("list", help="datasets that can be downloaded, and where they would go")
    download = data_commands.add_parser("download", help="download, verify and unpack a dataset")
    download.add_argument("name")
    download.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="target folder (default: HARNESS_DATA_DIR, else ~/.cache/harness/data)",
    )

    plot = commands.add_parser("plot", help="draw a plot that a plugin offers, from stored results and artifacts")
    plot.add_argument(
        "name", help="plot name: training (the store's training curves) or one of `harness list`'s plot components"
    )
    plot.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"store to read (default: for `plot leaderboard` ./{DEFAULT_PUBLISHED}, the published "
        f"records, as `harness leaderboard`; for every other plot your working store, "
        f"./{DEFAULT_RESULTS} or HARNESS_RESULTS_DIR)",
    )
    plot.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"folder for the PNG files (default ./{DEFAULT_LEADERBOARDS} for the published records, "
        "else <results>/leaderboards)",
    )
    plot_training.add_arguments(plot)

    site = commands.add_parser(
        "site",
        help="build one static results site (every table, compare any two rows, the examples behind a difference)",
    )
    site.add_argument("--to", type=Path, required=True, help="folder to write the site into (created)")
    site.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"store to build from (default ./{DEFAULT_PUBLISHED}; e.g. --results {DEFAULT_RESULTS} for your own runs)",
    )
    site.add_argument(
        "--serve",
        action="store_true",
        help="then serve it on http://127.0.0.1:PORT until Ctrl-C (Python's http.server)",
    )
    site.add_argument("--port", type=int, default=None, help="port for --serve (default 8000)")
    site.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="folder with datasets the examples view reads texts from (default: the one each record names, else "
        "HARNESS_DATA_DIR / the bundled data); texts of other data than a record's are withheld",
    )
    site.add_argument(
        "--matrix",
        type=Path,
        action="append",
        default=None,
        help="a matrix file whose paper table joins the index (as `harness leaderboard --matrix FILE --formats html` "
        "renders it); repeat for several",
    )
    site.add_argument(
        "--include-samples",
        action="store_true",
        help="as for `harness leaderboard`: show records computed on an evaluation sample, in sections of their own",
    )

    board = commands.add_parser("leaderboard", help="rebuild leaderboards/ from the published records")
    board.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"store to build from (default ./{DEFAULT_PUBLISHED}; e.g. --results {DEFAULT_RESULTS} for your own runs)",
    )
    board.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"folder for the tables (default ./{DEFAULT_LEADERBOARDS} for the published records, "
        "else <results>/leaderboards)",
    )
    board.add_argument(
        "--formats",
        default="md,csv",
        help=f"any of {', '.join(FORMATS)}, or a format a plugin offers (`harness list`, components "
        "of kind 'leaderboard-format')",
    )
    board.add_argument(
        "--matrix",
        type=Path,
        default=None,
        help="render one matrix file as its paper table (its entries as rows, its tasks as columns, "
        "the paper's numbers from its paper: block), into <output>/matrices/<file name>",
    )
    board.add_argument(
        "--reproduction",
        type=Path,
        default=None,
        help="write the reproduction page (e.g. docs/reproduction.md): every matrix's claims: block "
        "judged on the records, verdicts computed by the page's rule",
    )
    board.add_argument(
        "--matrix-dir",
        type=Path,
        default=Path("matrices"),
        help="the matrix files whose claims --reproduction reads (default ./matrices)",
    )
    board.add_argument(
        "--include-samples",
        action="store_true",
        help="also show records computed on an evaluation sample (max_eval_examples, e.g. --profile "
        "smoke), in sections of their own; left out by default",
    )
    board.add_argument(
        "--cost",
        action="store_true",
        help="add cost columns (training and evaluation wall time, items/s, peak memory, parameters) and the "
        "machine that measured them; records written before harness measured cost show -",
    )

    overlap = commands.add_parser(
        "contamination",
        help="how many test pairs and sentences each trained record's "
        "model saw in training (measured; --write adds it to records "
        "that lack it)",
    )
    overlap.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"the store to read (default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR; e.g. {DEFAULT_PUBLISHED})",
    )
    overlap.add_argument("--data-dir", type=Path, default=None, help="folder with datasets (or HARNESS_DATA_DIR)")
    overlap.add_argument(
        "--write", action="store_true", help="store the derived measurement in the records that lack it (sealed again)"
    )
    overlap.add_argument(
        "--recompute", action="store_true", help="derive it again for every record, also those that carry one"
    )

    publish = commands.add_parser(
        "publish", help="verify chosen records of your store and copy them into the published set"
    )
    publish.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"store to publish from (default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR)",
    )
    publish.add_argument(
        "--to", type=Path, default=Path(DEFAULT_PUBLISHED), help=f"the published set (default ./{DEFAULT_PUBLISHED})"
    )
    publish.add_argument(
        "--models",
        help="model specs as given to `harness run` (with --profile, --train-on, "
        "--backbone), or model keys, to publish (comma-separated)",
    )
    publish.add_argument(
        "--profile",
        default=None,
        help=f"as given to `harness run`: {', '.join(PROFILES)} (default quick for --models; "
        "else: records of this profile)",
    )
    publish.add_argument(
        "--train-on",
        default=None,
        help="as given to `harness run`, e.g. stsb (without --models: records trained on it; `none`: untrained ones)",
    )
    publish.add_argument("--backbone", default=None, help="as given to `harness run` (default: the profile's)")
    publish.add_argument("--tasks", help="task names or families to publish (comma-separated)")
    publish.add_argument("--seeds", default=None, help="seeds to publish (comma-separated)")
    publish.add_argument("--all", action="store_true", help="publish every valid record of the store")
    publish.add_argument("--overwrite", action="store_true", help="replace published records of the same cells")
    publish.add_argument(
        "--trust-unsigned",
        action="store_true",
        help="accept records written by harness 0.1 (no content checksum) after the other checks, and sign them",
    )
    publish.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="datasets to verify the records' dataset checksums against (or HARNESS_DATA_DIR)",
    )

    export = commands.add_parser(
        "export", help="write a trained model as a sentence-transformers folder (with a model card)"
    )
    export.add_argument("--models", required=True, help="one model spec, named as for `harness run`, e.g. be")
    export.add_argument("--to", type=Path, required=True, help="the folder to write (new or empty)")
    export.add_argument("--seeds", default=None, help="the one seed of the trained model (default 42)")
    export.add_argument("--backbone", default=None, help="as given to `harness run` (default: the profile's)")
    export.add_argument("--profile", default="quick", help=f"as given to `harness run`: {', '.join(PROFILES)}")
    export.add_argument("--train-on", default=None, help="as given to `harness run`, e.g. stsb")
    export.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"the store holding its checkpoint (default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR)",
    )
    export.add_argument("--device", default="cpu", help="device to load the model on while exporting")

    export_results = commands.add_parser(
        "export-results", help="write stored results in another benchmark's results layout (e.g. --format mteb)"
    )
    export_results.add_argument(
        "--format",
        required=True,
        help="a results format (`harness list`, components of kind 'results-format'), e.g. mteb",
    )
    export_results.add_argument("--to", type=Path, required=True, help="the folder to write into")
    export_results.add_argument(
        "--include-samples",
        action="store_true",
        help="also export records computed on an evaluation sample (max_eval_examples, e.g. "
        "--profile smoke), marked as samples; left out by default",
    )
    export_results.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"store to read (default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR)",
    )
    export_results.add_argument(
        "--overwrite", action="store_true", help="write into a folder that already holds files (they may be replaced)"
    )
    add_results_parser(commands)
    return parser


def add_slurm_options(parser: argparse.ArgumentParser) -> None:
    """The ``--slurm-*`` options of ``--executor slurm`` (harness.executors.slurm.SlurmOptions)."""
    parser.add_argument("--slurm-partition", default=None, help="with --executor slurm: the partition (sbatch -p)")
    parser.add_argument(
        "--slurm-account", default=None, help="with --executor slurm: the account to charge (sbatch -A)"
    )
    parser.add_argument(
        "--slurm-time", default=None, help="with --executor slurm: time limit per array task, e.g. 4:00:00"
    )
    parser.add_argument("--slurm-gpus", type=int, default=None, help="with --executor slurm: GPUs per array task")
    parser.add_argument(
        "--slurm-cpus", type=int, default=None, help="with --executor slurm: CPUs per array task (its PyTorch threads)"
    )
    parser.add_argument("--slurm-mem", default=None, help="with --executor slurm: memory per array task, e.g. 32G")
    parser.add_argument("--slurm-qos", default=None, help="with --executor slurm: the quality of service")
    parser.add_argument(
        "--slurm-sbatch-line",
        action="append",
        default=[],
        dest="slurm_sbatch_lines",
        metavar="OPTION",
        help="with --executor slurm: one more sbatch option, e.g. --constraint=a100 (repeatable)",
    )
    parser.add_argument(
        "--slurm-max-jobs", type=int, default=None, help="with --executor slurm: array tasks running at once (%%N)"
    )
    parser.add_argument(
        "--slurm-retries",
        type=int,
        default=None,
        help="with --executor slurm: submit a failed array task again up to this many times (default 2)",
    )
