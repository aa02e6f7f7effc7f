"""The zoo's table and plot: per model, the winning strategy, its margin, gradient bytes and the
communication share, from records alone."""
import csv

from results.records.store import write_record
from results.report import build as report, zoo
from results.report.summary import summarize
from tests.results.fake import record


def _model(model, dataset, times, grad_bytes, dense_bytes, comm, spread=0.0):
    """One model's comparison: baseline, all-cores reference, the three strategies at N=2 with
    the given steady epoch times (each strategy's epochs x (1 -/+ spread))."""
    cfg = {"model": model, "dataset": dataset}
    out = [record(f"{model}-base", run_name=f"baseline/{model}/1024/r0", epoch_time=2.0,
                  config=cfg, model=model, dataset=dataset),
           record(f"{model}-ref", run_name=f"hardware_reference/{model}/1024/r0",
                  epoch_time=times["ref"], threads=2, config=cfg, model=model, dataset=dataset)]
    for strategy in ("mirrored", "multi_worker_mirrored", "parameter_server"):
        rec = record(f"{model}-{strategy}", strategy, 2, epoch_time=times[strategy],
                     run_name=f"{strategy}-n2/{model}/1024/r0", config=cfg, model=model,
                     dataset=dataset, probe=0.01, spread=spread)
        rec["communication"].update(gradient_bytes=grad_bytes, dense_gradient_bytes=dense_bytes)
        rec["communication_fraction"] = comm[strategy]
        out.append(rec)
    return out


RECORDS = (
    _model("wide_mlp", "synthetic", {"ref": 1.0, "mirrored": 0.8, "multi_worker_mirrored": 1.6,
                                     "parameter_server": 2.4}, 40_000_000, 40_000_000,
           {"mirrored": 0.2, "multi_worker_mirrored": 0.6, "parameter_server": 0.7})
    + _model("embedding", "synthetic_tokens", {"ref": 1.0, "mirrored": 1.5,
                                               "multi_worker_mirrored": 1.25,
                                               "parameter_server": 1.0}, 550_160, 25_617_680,
             {"mirrored": 0.05, "multi_worker_mirrored": 0.15, "parameter_server": 0.1}))


def test_winner_margin_and_bytes_per_model():
    rows = {r["model"]: r for r in zoo.rows(summarize(RECORDS), RECORDS)}
    wide, emb = rows["wide_mlp"], rows["embedding"]
    assert wide["winner"] == "mirrored N=2" and wide["runner_up"] == "MWMS N=2"
    assert abs(wide["margin_over_runner_up"] - 2.0) < 1e-9  # 1.6 s vs 0.8 s per epoch
    assert abs(wide["winner_vs_single_process"] - 1.25) < 1e-9
    assert emb["winner"] == "PSS N=2" and abs(emb["margin_over_runner_up"] - 1.25) < 1e-9
    assert abs(emb["gradient_mb"] - 0.55016) < 1e-9
    assert abs(emb["dense_gradient_mb"] - 25.61768) < 1e-9
    assert [s[0] for s in emb["strategies"]] == ["PSS N=2", "MWMS N=2", "mirrored N=2"]
    assert emb["strategies"][0][4] == 0.1  # PSS's communication share
    text = zoo.markdown(list(rows.values()))
    assert "The answer flips with the model: embedding: PSS N=2, wide_mlp: mirrored N=2" in text
    assert "0.55 MB (25.6 MB)" in text and "2.00x over MWMS N=2" in text
    assert wide["tied_with"] == emb["tied_with"] == [] and "tied" not in text


def test_a_margin_within_the_epochs_spread_is_a_tie_and_no_flip(tmp_path):
    """mirrored 0.80 s against MWMS 0.84 s an epoch, each epoch 5% either way: mirrored's slowest
    epoch (0.84) does not beat MWMS's fastest (0.798), so the 1.05x is a tie; with the embedding
    tied three ways (MWMS, mirrored 1.04x and PSS 1.06x slower), MWMS or mirrored could win both:
    no flip. At 1% either way the same margins are beyond the spread, and the answer flips."""
    def both(spread):
        return (_model("wide_mlp", "synthetic", {"ref": 1.0, "mirrored": 0.8,
                                                 "multi_worker_mirrored": 0.84,
                                                 "parameter_server": 2.4}, 1, 1,
                       {"mirrored": 0.2, "multi_worker_mirrored": 0.6,
                        "parameter_server": 0.7}, spread) +
                _model("embedding", "synthetic_tokens", {"ref": 1.0, "mirrored": 1.04,
                                                         "multi_worker_mirrored": 1.0,
                                                         "parameter_server": 1.06}, 1, 1,
                       {"mirrored": 0.05, "multi_worker_mirrored": 0.15,
                        "parameter_server": 0.1}, spread))
    records = both(0.05)
    rows = {r["model"]: r for r in zoo.rows(summarize(records), records)}
    assert rows["wide_mlp"]["winner"] == "mirrored N=2"
    assert rows["wide_mlp"]["tied_with"] == ["MWMS N=2"]  # not PSS, 3x slower
    assert rows["embedding"]["winner"] == "MWMS N=2"
    assert rows["embedding"]["tied_with"] == ["mirrored N=2", "PSS N=2"]  # all three
    text = zoo.markdown(list(rows.values()))
    assert "1.05x over MWMS N=2 (a tie: within the epochs' spread)" in text
    assert "1.04x over mirrored N=2 (tied with mirrored N=2, PSS N=2: within the epochs' " \
        "spread)" in text
    assert "The answer flips" not in text
    assert "MWMS N=2 or mirrored N=2 could win for every model (embedding: MWMS N=2 tied with " \
        "mirrored N=2 and PSS N=2, wide_mlp: mirrored N=2 tied with MWMS N=2)" in text
    for rec in records:  # and zoo.csv names them, one cell per model
        write_record(str(tmp_path), rec)
    report.build(str(tmp_path))
    with open(tmp_path / "zoo.csv") as f:
        tied = {r["model"]: r["tied_with"] for r in csv.DictReader(f)}
    assert tied == {"embedding": "mirrored N=2; PSS N=2", "wide_mlp": "MWMS N=2"}
    # one process (the reference): 1.0 s every epoch; mirrored's 0.80 s (at most 0.84) beats it
    # beyond the spread, MWMS's 1.00 s (0.95-1.05) does not
    assert rows["wide_mlp"]["beats_single_process"]
    assert not rows["embedding"]["beats_single_process"]
    assert "For embedding the winner's margin over one process is within the epochs' spread" in text
    records = both(0.01)
    rows = {r["model"]: r for r in zoo.rows(summarize(records), records)}
    assert rows["wide_mlp"]["tied_with"] == rows["embedding"]["tied_with"] == []
    assert "The answer flips with the model: embedding: MWMS N=2, wide_mlp: mirrored N=2" in \
        zoo.markdown(list(rows.values()))


def test_one_model_has_no_zoo_section():
    one = [r for r in RECORDS if r["model"] == "wide_mlp"]
    assert zoo.rows(summarize(one), one) == []


def test_report_writes_the_zoo_table_and_plot(tmp_path):
    for rec in RECORDS:
        write_record(str(tmp_path), rec)
    paths, problems, _ = report.build(str(tmp_path))
    assert not problems
    names = {p.rsplit("/", 1)[-1] for p in paths}
    assert {"zoo.png", "zoo.csv", "report.md"} <= names
    with open(tmp_path / "zoo.csv") as f:
        table = list(csv.DictReader(f))
    assert [r["winner"] for r in table] == ["PSS N=2", "mirrored N=2"]  # settings in sorted order
    text = (tmp_path / "report.md").read_text()
    assert text.index("## Across models") < text.index("## embedding")
    assert "![zoo.png](zoo.png)" in text
