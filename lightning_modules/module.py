"""The thin LightningModule around the Transformer: loss, optimizer and schedule, logging, decoding for validation
and test.

Knows nothing about Optuna or W&B. Validation computes loss and per-subword perplexity on the whole dev set and
BLEU (sacrebleu, detokenized) on the decoded dev set, deduplicated by sentence index and gathered across ranks.
Test (`trainer.test`, after training) decodes the whole test split the same way and scores BLEU and chrF.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

import pytorch_lightning as pl
import torch
from ablate.data.errors import ConfigError
from ablate.lightning_modules import card
from ablate.lightning_modules.config import ModelConfig, TrainConfig, cooldown_factor, for_compile, paper_lr
from ablate.lightning_modules.decoding import beam_search, greedy_search
from ablate.lightning_modules.graphed import ReplayedStep, ReplayFailed, capturable_adam, set_lr
from ablate.lightning_modules.kernels import (
    FusedLinearLabelSmoothedNLL,
    LabelSmoothedNLL,
    compile_for_training,
    eager,
)
from ablate.lightning_modules.metrics import bleu_metric, chrf_metric, corpus_score, perplexity
from ablate.lightning_modules.static_decoding import static_beam_search
from ablate.lightning_modules.transformer import Transformer
from pytorch_lightning.core.optimizer import LightningOptimizer
from torch import Tensor
from torch.optim.lr_scheduler import LambdaLR

if TYPE_CHECKING:
    from ablate.data.datamodule import TranslationDataModule

# Checkpoints store the configs (save_hyperparameters); let torch.load(weights_only=True) accept them, under their
# name now and under the one they had before every folder became a subpackage of `ablate`: a sweep started before an
# upgrade resumes its interrupted trials from their checkpoints instead of failing them.
LEGACY_MODULE = "lightning_modules.config"
torch.serialization.add_safe_globals(
    [
        ModelConfig,
        TrainConfig,
        (ModelConfig, f"{LEGACY_MODULE}.ModelConfig"),
        (TrainConfig, f"{LEGACY_MODULE}.TrainConfig"),
    ]
)


LOSS_READ_EVERY = 25
"""On a GPU, the blow-up check reads the training loss from the device every this many steps (`LossWatch`)."""


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or inf: the run is reported as diverged, not retried."""


def label_smoothed_nll(logits: Tensor, target: Tensor, eps: float, pad_id: int) -> tuple[Tensor, Tensor]:
    """Per-token label-smoothed cross-entropy and unsmoothed NLL, both (N,) with zeros at padding.

    The smoothed target is (1 - eps) * one_hot + eps / V (Szegedy et al., 2016, as cited in section 5.4), so
    loss = (1 - eps) * nll + eps * mean_k(-log p_k); it equals F.cross_entropy(label_smoothing=eps). Perplexity needs
    the unsmoothed NLL too; both come from one pass over the vocabulary.

    Why the custom `LabelSmoothedNLL` and not F.cross_entropy: at the paper's vocabulary (V = 37000) the loss is the
    largest activation of the step, and `LabelSmoothedNLL` needs a fraction of F.cross_entropy's peak memory above
    the logits (in bf16 the saving is larger: chunked float32 temporaries). At a paper batch that saving decides
    whether the base model fits a GPU, so the custom loss stays, on every device. Measured:
    docs/reference/code-figures.md, "lightning_modules/module.py".
    """
    return LabelSmoothedNLL.apply(logits, target, eps, pad_id)


class LossWatch:
    """The blow-up check of the training loss: NaN or inf, or, once warmup is over, a finite blow-up (a loss above 3x
    the first step's, which is about log V, a uniform guess's) is a run that diverged, not one learning slowly.

    Reading a loss on a GPU is a host sync, which would drain the queue of launched kernels at every step. Where
    `every_step` is False (a card's path `card.SETTINGS["loss watch"]`) the worst loss since the last read stays on
    the device (NaN propagates through `maximum`) and is read every LOSS_READ_EVERY steps, so a diverged run stops at
    most that many steps late."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.worst: Tensor | None = None
        self.read = False
        """Whether the last `observe` read the loss from the device (every rank reads at the same steps)."""

    def observe(self, loss: Tensor, step: int, warmup_steps: int, every_step: bool) -> str | None:
        """The problem with the training loss at `step`, if one was read; None otherwise."""
        worst = loss.detach().float() if self.worst is None else torch.maximum(self.worst, loss.detach().float())
        self.read = every_step or self.first is None or (step + 1) % LOSS_READ_EVERY == 0
        if not self.read:
            self.worst = worst
            return None
        self.worst, value = None, float(worst)
        if not math.isfinite(value):
            return f"training loss became {value} at step {step}"
        if self.first is None:
            self.first = value
        elif step > warmup_steps and value > 3 * self.first:
            return f"training loss {value:.4g} at step {step} is above 3x its first value {self.first:.4g}"
        return None


class TranslationModule(pl.LightningModule):
    """Trains `Transformer` with the recipe of section 5 and reports dev loss, perplexity and BLEU.

    The datamodule (if attached to the trainer) supplies `tokenizer` and `references("valid")` for BLEU.
    """

    def __init__(self, model: ModelConfig, train: TrainConfig, *, bos_id: int, eos_id: int) -> None:
        """bos_id and eos_id are the tokenizer's (model.pad_id too: `ablations.training.trainer.fit_to_tokenizer`)."""
        super().__init__()
        self.save_hyperparameters(logger=False)  # the W&B config is the resolved RunConfig, logged by ablations
        self.model_config, self.train_config = model, train
        self.bos_id, self.eos_id = bos_id, eos_id
        self.model = Transformer(for_compile(model) if train.compile else model)
        self.bleu_limit: int | None = train.val_max_sentences
        self.final_validation = False
        """Set for the run's last validation (at max_steps), which also checks that the model uses its source."""
        self.budget: str | None = None
        """The shorter budget this fit is a branch for ('T/2', train.budgets), None in the main run: what progress
        reports name the phase by. Set by the trainer of a branch; not a hyperparameter (the weights are the same)."""
        # Non-pad source / target tokens trained on by this rank, summed on the device: reading them forces a host
        # sync, so that happens only when progress or results are reported, not every step. Not a buffer: DDP would
        # broadcast rank 0's counts over every rank's at each forward.
        self._tokens_seen = torch.zeros(2, dtype=torch.long)
        self.last_validation: dict[str, Any] = {}
        self._val: dict[str, Any] = {}
        self.last_test: dict[str, Any] = {}
        """The last test decoding's scores and hypotheses (`corpus_scores`); {} before one (or on an empty split)."""
        self._test: dict[str, Any] = {}
        self._loss_watch = LossWatch()
        """The blow-up check of the training loss; its first loss is kept in checkpoints."""
        self.automatic_optimization = not train.replay_step  # the replayed step runs its own backward and update

    # ----------------------------------------------------------------------------------------------- training
    def configure_model(self) -> None:
        """torch.compile the training forward when asked (decoding stays eager: its shapes change every step). With
        train.fused_loss the training forward is `features` (the projection happens in the loss)."""
        # Process-wide, as PyTorch's switch is: a trial process trains one model. No-op without CUDA.
        torch.backends.cuda.enable_cudnn_sdp(self.train_config.cudnn_attention)
        if self.train_config.compile and "_compiled" not in self.__dict__:
            # Not a submodule: no duplicate state_dict keys.
            net = self.model.features if self.train_config.fused_loss else self.model
            cfg = self.train_config
            self.__dict__["_compiled"] = compile_for_training(net, scope=cfg.compile_scope, cuda_graphs=cfg.cuda_graphs)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        net = self.__dict__.get("_compiled") if self.training and not self.train_config.fused_loss else None
        return (net if net is not None else self.model)(src, tgt_in)  # not `or`: a compiled module refuses bool()

    def _losses(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        """(summed loss with its gradient, per-token loss (N,), per-token NLL (N,)) of a batch; in training with
        train.fused_loss the logits are never built whole (`FusedLinearLabelSmoothedNLL`)."""
        cfg, target = self.model_config, batch["tgt_out"].flatten()
        if self.training and self.train_config.fused_loss:
            compiled = self.__dict__.get("_compiled")
            hidden = (compiled if compiled is not None else self.model.features)(batch["src"], batch["tgt_in"])
            weight = self.model.output.weight
            return FusedLinearLabelSmoothedNLL.apply(
                hidden.flatten(0, 1), weight, target, cfg.label_smoothing, cfg.pad_id, self.train_config.compile
            )
        logits = self(batch["src"], batch["tgt_in"])  # (B, T, V)
        loss, nll = label_smoothed_nll(logits.flatten(0, 1), target, cfg.label_smoothing, cfg.pad_id)
        return loss.sum(), loss, nll

    def _shared_step(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """Forward and loss on one batch. Logs f"{stage}/loss" (per target token) during training; returns the
        mean loss and per-sentence sums (smoothed loss, unsmoothed NLL, target tokens) for exact dev aggregates."""
        out = self._outputs(batch)
        if stage == "train":
            self._log_loss(out["loss"], batch["src"].size(0))
        return out

    def _outputs(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """The step's outputs, tensors only (what a replayed step records): the mean loss with its gradient, and the
        per-sentence sums of the smoothed loss, the unsmoothed NLL and the target tokens."""
        total, loss, nll = self._losses(batch)
        bsz = batch["src"].size(0)
        ntok = (batch["tgt_out"] != self.model_config.pad_id).sum(1)  # (B,)
        return {
            "loss": total / ntok.sum().clamp(min=1),
            "loss_sum": loss.view(bsz, -1).sum(1),
            "nll_sum": nll.view(bsz, -1).sum(1),
            "ntok": ntok,
        }

    def _log_loss(self, loss: Tensor, bsz: int) -> None:
        # Not prog_bar: Lightning turns a progress-bar metric into a Python number every step (a host sync), with or
        # without a bar; the Recorder reads the loss at its logging interval.
        self.log("train/loss", loss, batch_size=bsz)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        if self.train_config.replay_step:  # forward, backward and Adam in one replayed graph (graphed.py)
            out = {k: v.detach().clone() for k, v in self._replayed(batch).items()}  # the next replay overwrites
            self._log_loss(out["loss"], batch["src"].size(0))
        else:
            out = self._shared_step(batch, "train")
        loss, ntok = out["loss"], out["ntok"]
        if self.train_config.nan_check:
            self._check_loss(loss)
        if self._tokens_seen.device != loss.device:
            self._tokens_seen = self._tokens_seen.to(loss.device)
        self._tokens_seen[0] += (batch["src"] != self.model_config.pad_id).sum()
        self._tokens_seen[1] += ntok.sum()
        self.log("train/ppl", torch.exp(out["nll_sum"].sum() / ntok.sum().clamp(min=1)), batch_size=ntok.numel())
        # The loggers' step (Lightning takes a logged "step" as the x value): the optimizer steps done once this
        # batch's update is applied, as the results count them. Lightning's default is the count before it, one less.
        # Both are written into device tensors in place: a logged Python float becomes a new device tensor, a
        # blocking host-to-device copy every step; Lightning reads them back only when its loggers write.
        lr, step = self._scalars(loss.device)
        self.log("train/lr", lr.fill_(self._scheduler().get_last_lr()[0]), batch_size=ntok.numel())
        self.log("step", step.fill_(self.global_step + 1), batch_size=ntok.numel())
        if self.train_config.replay_step:
            self._after_replayed_step()
        return loss

    # ------------------------------------------------------------------------------------------- replayed step
    def _replayed(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """This fit's replayed step (made anew for each fit: a graph holds the addresses of the weights, gradients
        and Adam's state, which a checkpoint's load replaces)."""
        replayed = self.__dict__.get("_replayed_step")
        if replayed is None:
            optimizer = cast(torch.optim.Optimizer, self._scheduler().optimizer)
            record = optimizer.param_groups[0]["params"][0].is_cuda
            replayed = self.__dict__["_replayed_step"] = ReplayedStep(self._graphed_body, optimizer, record)
        try:
            return replayed(batch)
        except ReplayFailed as err:
            raise ConfigError(f"train.replay_step: {err}; set train.replay_step false") from err

    def _graphed_body(self, inputs: dict[str, Tensor]) -> dict[str, Tensor]:
        """What the replayed step records: forward, loss, backward and Adam's update, no host read."""
        out = self._outputs(inputs)
        with torch.autocast(self.device.type, enabled=False):  # as Lightning's loop runs them: outside autocast
            out["loss"].backward()
            self._scheduler().optimizer.step()
        return {k: v.detach() for k, v in out.items()}

    def _after_replayed_step(self) -> None:
        """Manual optimization's bookkeeping, as Lightning's automatic loop does it: the schedule's next rate (filled
        into the device tensor Adam reads) and the step count (`LightningOptimizer.step` counts through these two
        hooks, which the manual loop sets)."""
        self._scheduler().step()
        optimizer = cast(LightningOptimizer, self.optimizers())
        optimizer._on_before_step()
        optimizer._on_after_step()

    def _scalars(self, device: torch.device) -> tuple[Tensor, Tensor]:
        """Two float64 scalars on the training device, made once: the logged learning rate and step."""
        scalars = self.__dict__.get("_logged_scalars")
        if scalars is None or scalars.device != device:
            scalars = self.__dict__["_logged_scalars"] = torch.zeros(2, dtype=torch.float64, device=device)
        return scalars[0], scalars[1]

    def _check_loss(self, loss: Tensor) -> None:
        """Stop a run whose training loss diverged (`LossWatch`); the loss is read from the device every step, or every
        LOSS_READ_EVERY steps on a card that takes that path (`card`)."""
        step, every_step = self.global_step, not card.takes("loss watch", loss.is_cuda)
        problem = self._loss_watch.observe(loss, step, self.train_config.warmup_steps, every_step)
        # Every rank stops together: one rank raising while the others wait in the gradient all-reduce would hang.
        # The ranks read their losses at the same steps, and agree only then (an all-reduce is a host sync too).
        if self._trainer is not None and self.trainer.world_size > 1 and self._loss_watch.read:
            if self.trainer.strategy.reduce_boolean_decision(problem is not None, all=False) and problem is None:
                problem = f"training diverged on another rank at step {step}"
        if problem is not None:
            raise TrainingDiverged(problem)

    def on_train_start(self) -> None:
        """The learning rate of the next update, from this run's schedule. A resumed optimizer carries the rate its
        previous run set, which a branch to a shorter budget (train.budgets) must not inherit: its cooldown begins
        at the very step it resumes from."""
        scheduler = self._scheduler()
        optimizer = scheduler.optimizer
        for group, base, factor in zip(optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas, strict=True):
            set_lr(group, float(base) * factor(scheduler.last_epoch), self.device)
        self.__dict__.pop("_replayed_step", None)  # graphs are recorded again in each fit

    def _scheduler(self) -> LambdaLR:
        """The one schedule `configure_optimizers` returns (Lightning types `lr_schedulers()` as None, one or many)."""
        return cast(LambdaLR, self.lr_schedulers())

    def references(self, split: str) -> list[str]:
        """The split's reference sentences, from the run's data module (Lightning sets `trainer.datamodule` when a
        fit or test starts; its types do not declare it)."""
        datamodule: TranslationDataModule = self.trainer.datamodule  # pyright: ignore[reportAttributeAccessIssue]
        return datamodule.references(split)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["first_loss"] = self._loss_watch.first  # the blow-up check's yardstick

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self._loss_watch.first = checkpoint.get("first_loss")

    @property
    def src_tokens_seen(self) -> int:
        return int(self._tokens_seen[0])

    @property
    def tgt_tokens_seen(self) -> int:
        return int(self._tokens_seen[1])

    def configure_optimizers(self):
        """Adam (0.9, 0.98, 1e-9) with equation (3): lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5),
        annealed linearly to zero over the last train.cooldown_frac of max_steps (0, the paper's: never)."""
        cfg = self.train_config
        # The fused kernel exists for CPU and CUDA: one pass over all parameters instead of a Python loop of small
        # ops, far faster at the tiny preset on CPU:
        # docs/reference/code-figures.md, "lightning_modules/module.py".
        fused = all(p.device.type in ("cpu", "cuda") for p in self.parameters())
        if cfg.replay_step:  # the rate a device tensor, read inside the replayed step
            opt = capturable_adam(self.parameters(), cfg.adam_betas, cfg.adam_eps, fused=fused or None)
        else:
            opt = torch.optim.Adam(
                self.parameters(), lr=1.0, betas=cfg.adam_betas, eps=cfg.adam_eps, fused=fused or None
            )
        d_model = self.model_config.d_model

        def lr(step: int) -> float:  # LambdaLR's step counts updates done; equation (3) counts from 1
            paper = paper_lr(step + 1, d_model, cfg.warmup_steps, cfg.lr_factor)
            return paper * cooldown_factor(step + 1, cfg.max_steps, cfg.cooldown_frac)

        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # --------------------------------------------------------------------------------------------- validation
    def translate(self, src: Tensor, beam_size: int | None = None) -> list[list[int]]:
        """Decode a padded source batch with the configured beam (1 = greedy). Returns token ids per sentence."""
        cfg = self.train_config
        beam = cfg.beam_size if beam_size is None else beam_size
        ids = dict(bos_id=self.bos_id, eos_id=self.eos_id, max_len_b=cfg.max_len_b)
        with eager():  # a decoder's cache is Python state, and its shapes change every step
            if beam == 1:
                return greedy_search(self.model, src, max_len_a=cfg.max_len_a, **ids)
            search = static_beam_search if self.decoding(src.is_cuda) == "static" else beam_search
            return search(
                self.model, src, self.bos_id, self.eos_id, beam, cfg.length_penalty, cfg.max_len_a, cfg.max_len_b
            )

    def decoding(self, cuda: bool) -> str:
        """How the configured beam decodes, on a CUDA device or not: 'greedy' (beam 1), else train.decoding resolved
        ('auto': `card`), 'static' or 'dynamic'."""
        if self.train_config.beam_size == 1:
            return "greedy"
        return card.resolve("train.decoding", self.train_config.decoding, cuda)

    def on_validation_epoch_start(self) -> None:
        self._val = {"loss_sum": {}, "nll_sum": {}, "ntok": {}, "hyps": {}, "nll_swapped": {}}

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        with eager():  # compiled layers (train.compile_scope 'layers') train compiled and evaluate eagerly
            self._validate(batch)

    def _validate(self, batch: dict[str, Tensor]) -> None:
        out = self._shared_step(batch, "val")
        index = batch["index"].tolist()
        # Keyed by sentence index, so a batch repeated to even out ranks is counted once.
        for key in ("loss_sum", "nll_sum", "ntok"):
            self._val[key].update(zip(index, out[key].tolist(), strict=True))
        if self.final_validation and len(index) > 1:  # does the model use its source?
            swapped = self._shared_step({**batch, "src": batch["src"].roll(1, dims=0)}, "val")
            self._val["nll_swapped"].update(zip(index, swapped["nll_sum"].tolist(), strict=True))
        tokenizer = self._tokenizer()
        if tokenizer is None:
            return
        chosen = [row for row, i in enumerate(index) if self.bleu_limit is None or i < self.bleu_limit]
        if chosen:
            ids = self.translate(batch["src"][chosen])
            for row, text in zip(chosen, tokenizer.decode(ids), strict=True):
                self._val["hyps"][index[row]] = text

    def _tokenizer(self):
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        return getattr(datamodule, "tokenizer", None)

    def on_validation_epoch_end(self) -> None:
        gathered = self._all_ranks(self._val)
        ntok = sum(gathered["ntok"].values())
        nll = sum(gathered["nll_sum"].values()) / max(ntok, 1)
        result: dict[str, Any] = {
            "step": self.global_step,
            "loss": sum(gathered["loss_sum"].values()) / max(ntok, 1),
            "nll": nll,
            "ppl": perplexity(nll),
            "sentences": len(gathered["ntok"]),
        }
        order = sorted(gathered["ntok"])
        # Per-sentence NLL and token counts, in dev order: the report's sentence bootstrap of perplexity needs them.
        result["sentence_nll"] = [gathered["nll_sum"][i] for i in order]
        result["sentence_ntok"] = [gathered["ntok"][i] for i in order]
        if gathered["nll_swapped"]:
            result.update(source_use(gathered["nll_swapped"], gathered["nll_sum"], gathered["ntok"]))
        if gathered["hyps"]:
            result.update(self._bleu(gathered["hyps"]))
        self.last_validation = result
        self._check_perplexity(result["ppl"])
        for key in ("loss", "nll", "ppl", "bleu"):
            if key in result:
                self.log(f"val/{key}", float(result[key]), sync_dist=False, rank_zero_only=False)
        # Logged at the optimizer steps done, the step of this point in the results (see training_step).
        self.log("step", float(result["step"]), sync_dist=False, rank_zero_only=False)

    def _all_ranks(self, part: dict[str, dict[int, Any]]) -> dict[str, dict[int, Any]]:
        """This rank's {name: {sentence index: value}} merged with every other rank's: validation and test decode a
        shard each. Keyed by sentence index, so a batch repeated to even out the ranks counts once."""
        if self._trainer is None or self.trainer.world_size == 1:
            return part
        parts: list[Any] = [None] * self.trainer.world_size  # each rank's `part`, once gathered
        torch.distributed.all_gather_object(parts, part)
        return {key: {k: v for p in parts for k, v in p[key].items()} for key in part}

    def _check_perplexity(self, ppl: float) -> None:
        """A dev perplexity above the vocabulary size after warmup is worse than guessing every token uniformly: the
        run diverged even if its loss stayed finite (lr_factor 1000 reached a dev PPL of 5e21 as a 'complete' row)."""
        fitting = self._trainer is not None and self.trainer.training is False and self.trainer.state.fn == "fit"
        if (
            self.train_config.nan_check
            and fitting
            and self.global_step > self.train_config.warmup_steps
            and ppl > self.model_config.vocab_size
        ):
            raise TrainingDiverged(
                f"dev perplexity {ppl:.4g} at step {self.global_step} is above the vocabulary size "
                f"{self.model_config.vocab_size} (a uniform guess)"
            )

    def _bleu(self, hyps: dict[int, str]) -> dict[str, Any]:
        """Corpus BLEU of the decoded sentences against the raw references, with sacrebleu's signature."""
        references = self.references("valid")
        scores = corpus_scores(hyps, references, chrf=False)
        # BLEU on the sentences every periodic validation decodes (train.val_max_sentences), also when this one
        # decoded more (the final, full validation): consecutive points of the curve then compare like with like,
        # which the plateau check needs.
        limit = self.train_config.val_max_sentences
        tracked = {i: h for i, h in hyps.items() if limit is None or i < limit}
        tracked_score = (
            scores["bleu"] if len(tracked) == len(hyps) else corpus_scores(tracked, references, chrf=False)["bleu"]
        )
        return {
            "bleu": scores["bleu"],
            "bleu_tracked": tracked_score,
            "bleu_signature": scores["bleu_signature"],
            "bleu_sentences": scores["sentences"],
            "hypotheses": scores["hypotheses"],
            "hypothesis_index": scores["hypothesis_index"],
        }

    # --------------------------------------------------------------------------------------------------- test
    def on_test_epoch_start(self) -> None:
        self._test = {"hyps": {}}

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        """Decode every sentence of the batch with the dev decoding's beam search (section 6.1), keyed by index."""
        tokenizer = self._tokenizer()
        if tokenizer is None:
            raise RuntimeError("test decoding needs a TranslationDataModule on the trainer (tokenizer, references)")
        texts = tokenizer.decode(self.translate(batch["src"]))
        self._test["hyps"].update(zip(batch["index"].tolist(), texts, strict=True))

    def on_test_epoch_end(self) -> None:
        """The whole test split's hypotheses, gathered over ranks, scored by sacreBLEU (`last_test`)."""
        hyps = self._all_ranks(self._test)["hyps"]
        self.last_test = corpus_scores(hyps, self.references("test")) if hyps else {}


def source_use(nll_swapped: dict[int, float], nll: dict[int, float], ntok: dict[int, int]) -> dict[str, float]:
    """Dev perplexity with every source swapped for another dev sentence's (the next one in its length-bucketed
    batch, so of about the same length), and its ratio to the true sources' perplexity on the same sentences. A model
    that translates predicts much worse from the wrong source (a ratio far above 1); a language model of the target,
    which ignores its source, does not notice (a ratio near 1). Sentences in a batch of one have no partner and are
    left out of both."""
    tokens = sum(ntok[i] for i in nll_swapped)
    swapped = sum(nll_swapped.values()) / max(tokens, 1)
    true = sum(nll[i] for i in nll_swapped) / max(tokens, 1)
    return {"ppl_swapped": perplexity(swapped), "source_ppl_ratio": perplexity(swapped - true)}


def corpus_scores(hyps: dict[int, str], references: list[str], *, chrf: bool = True) -> dict[str, Any]:
    """Corpus BLEU (and chrF) of decoded sentences by sentence index against the raw references, with the metrics of
    `lightning_modules.metrics` (sacreBLEU's defaults, as the report uses); with their signatures, and the hypotheses
    in index order. Dev validation (BLEU only) and the test split both score through here."""
    order = sorted(hyps)
    texts, refs = [hyps[i] for i in order], [references[i] for i in order]
    bleu, bleu_signature = corpus_score(bleu_metric(), texts, refs)
    scores: dict[str, Any] = {
        "bleu": bleu,
        "bleu_signature": bleu_signature,
        "sentences": len(order),
        "hypotheses": texts,
        "hypothesis_index": order,
    }
    if chrf:
        score, signature = corpus_score(chrf_metric(), texts, refs)
        scores |= {"chrf": score, "chrf_signature": signature}
    return scores


def average_state_dicts(states: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Element-wise mean of several state dicts (checkpoint averaging, section 6.1). Integer buffers keep the last."""
    out = {}
    for key, last in states[-1].items():
        if torch.is_floating_point(last):
            total = cast(Tensor, sum(s[key].float() for s in states))  # sum() starts from the int 0
            out[key] = total.div(len(states)).to(last.dtype)
        else:
            out[key] = last
    return out


def average_checkpoints(paths: list[str]) -> dict[str, Tensor]:
    """Average the model weights of several Lightning checkpoint files (like fairseq's average_checkpoints.py)."""
    states = [torch.load(p, map_location="cpu", weights_only=False)["state_dict"] for p in paths]
    return average_state_dicts(states)


class CheckpointAveraging(pl.Callback):
    """Averages the weights of the last k validation points (kept in CPU memory) into the model at the final step,
    before the final validation, so the reported dev scores are those of the averaged model."""

    def __init__(self, last: int) -> None:
        self.last = last
        self.states: list[dict[str, Tensor]] = []

    def _snapshot(self, pl_module: pl.LightningModule) -> None:
        self.states.append({k: v.detach().to("cpu", copy=True) for k, v in pl_module.state_dict().items()})
        self.states = self.states[-self.last :]

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.training and not trainer.sanity_checking and trainer.global_step < (trainer.max_steps or 0):
            self._snapshot(pl_module)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        if trainer.max_steps and trainer.global_step >= trainer.max_steps and self.states:
            self._snapshot(pl_module)
            pl_module.load_state_dict(average_state_dicts(self.states))
            self.states = []


__all__ = [
    "TranslationModule",
    "TrainingDiverged",
    "LossWatch",
    "label_smoothed_nll",
    "corpus_scores",
    "source_use",
    "LabelSmoothedNLL",
    "CheckpointAveraging",
    "average_checkpoints",
]
