"""Rules across keys that no single key's declaration can express, and advice about
settings that run but probably do not say what was meant."""

from __future__ import annotations

from dliobench.base.errors import ConfigError
from dliobench.config import read_requests
from dliobench.config import values as cv
from dliobench.config.schema import Config


def advice(config: Config) -> list[str]:
    """Warnings about settings that run but probably do not say what was meant."""
    said: list[str] = []
    d = config.dataset
    mean, stdev = d.record_length_bytes, d.record_length_bytes_stdev
    if stdev > mean / 2:  # e.g. UNet3D scaled to a 2 MiB mean keeps its 68 MB stdev
        said.append(f"dataset.record_length_bytes_stdev ({stdev:,} B) is more than half of "
                    f"dataset.record_length_bytes ({mean:,} B): sample sizes will range from "
                    f"1 B to about {mean + 3 * stdev:,} B; when scaling a workload down, scale "
                    "its stdev too (dliobench does not change it for you)")
    ckpt, train = config.checkpoint, config.train
    if (config.workflow.checkpoint and config.workflow.train
            and ckpt.steps_between_checkpoints <= 0
            and train.epochs < ckpt.checkpoint_after_epoch):
        # e.g. unet3d_b200.yaml checkpoints after epoch 5: a 2-epoch run would write none
        said.append(f"workflow.checkpoint is true but train.epochs ({train.epochs}) is below "
                    f"checkpoint.checkpoint_after_epoch ({ckpt.checkpoint_after_epoch}), so "
                    "no checkpoint will be written; run more epochs or lower "
                    "checkpoint.checkpoint_after_epoch")
    return said


def check(config: Config) -> None:
    """Cross-key rules that no single key can express."""
    train = config.train
    if train.total_training_steps == 0 or train.total_training_steps < -1:
        raise ConfigError("train.total_training_steps must be a positive number of steps, "
                          "or -1 to run all epochs")
    if config.dataset.num_subfolders_train > config.dataset.num_files_train:
        raise ConfigError("dataset.num_subfolders_train must not exceed dataset.num_files_train")
    ceiling = config.metric.client_ceiling
    if ceiling not in ("auto", "off") and not (cv.is_number(ceiling) and float(ceiling) > 0):
        raise ConfigError(f"metric.client_ceiling: {ceiling!r} is not 'auto', 'off' or a number "
                          "of samples/s per rank (such as 1250)")
    busy = config.metric.client_cpu_busy
    if busy != "off" and not (cv.is_number(busy) and 0 < float(busy) <= 1):
        raise ConfigError(f"metric.client_cpu_busy: {busy!r} is not 'off' or a share of the "
                          "host's CPU time above 0 and at most 1 (such as 0.9)")
    if config.reader.prefetch_size < 0 and config.reader.data_loader != "tensorflow":
        raise ConfigError("reader.prefetch_size: autotune is tf.data's AUTOTUNE and needs "
                          "reader.data_loader: tensorflow; give other loaders a number of batches")
    read_requests.check(config.reader.read_requests, config.dataset.num_samples_per_file)
    _check_decoder(config)
    _check_checkpoint(config)
    kv = config.kvcache
    if kv.tensor_parallel > kv.num_gpus:
        raise ConfigError(f"kvcache.tensor_parallel ({kv.tensor_parallel}) cannot exceed "
                          f"kvcache.num_gpus ({kv.num_gpus}); raise num_gpus or lower it")


def _check_decoder(config: Config) -> None:
    """reader.decoder decodes JPEG files where dliobench decodes them."""
    r = config.reader
    if r.decoder == "pil":
        return
    if config.dataset.format != "jpeg":
        raise ConfigError(f"reader.decoder: {r.decoder} decodes jpeg files, not "
                          f"{config.dataset.format}; leave reader.decoder at pil")
    if r.data_loader == "dali" and r.dali_native_reader:
        raise ConfigError(f"reader.decoder: {r.decoder} is not used with "
                          "reader.dali_native_reader, where DALI decodes with its own "
                          "fn.decoders.image; leave reader.decoder at pil or the native reader off")


def _check_checkpoint(config: Config) -> None:
    """workflow.checkpoint asks for checkpoints: refuse settings under which none is written."""
    if not config.workflow.checkpoint:
        return
    if config.model.model_size_bytes == 0 and config.model.num_layers == 0:
        raise ConfigError("workflow.checkpoint is true but model.model_size_bytes is 0 and "
                          "model.num_layers is 0, so nothing would be written; set "
                          "model.model_size_bytes (DLIO's checkpoint.model_size), e.g. 500MB, "
                          "use a transformer preset (workloads/llama3_8b.yaml), or set "
                          "workflow.checkpoint=false")
    m = config.model
    if not config.workflow.train and m.num_layers == 0:  # the layout would have no tensors
        raise ConfigError("workflow.train is false, so workflow.checkpoint runs the "
                          "checkpoint-only workflow, which writes a transformer's layout, but "
                          "model.num_layers is 0; use a transformer preset "
                          "(workloads/llama3_8b.yaml), or set workflow.train=true to write "
                          "model.model_size_bytes checkpoints while training")
    if m.num_layers and m.hidden_size * m.vocab_size == 0:
        raise ConfigError("model.num_layers is set but model.transformer.hidden_size or "
                          "vocab_size is 0; give the transformer's sizes (see "
                          "workloads/llama3_8b.yaml)")
    if m.num_layers and config.workflow.train and m.model_size_bytes == 0:
        raise ConfigError("workflow.train and workflow.checkpoint are true but training-time "
                          "checkpoints are sized by model.model_size_bytes, which is 0; the "
                          "transformer layout (model.num_layers) is written by the "
                          "checkpoint-only workflow: set workflow.train=false, or set "
                          "model.model_size_bytes")
    if config.checkpoint.scale <= 0:
        raise ConfigError("checkpoint.scale must be above 0 (1: full size, 0.001: a "
                          "thousandth of every tensor)")
