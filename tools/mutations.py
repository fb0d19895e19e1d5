"""Recipe mutations against the test suite: does each deliberate bug fail a test?

Each mutation below is one plausible bug in the paper recipe (augmentation,
mixing, normalisation, initialisation, model, optimizer, schedule), in what
pairing runs by seed rests on (the data order, the validation split, the
augmentation and mixing draws: functions of the seed and the epoch alone), in a
moved constant of the paper presets, or in a tuned sweep's count of failed
trials, written as an exact text replacement in one file. For each, this script
copies the checkout to a temporary folder, applies the replacement, runs the
tests there (``TESTS``, the fast lane; or the tests a mutation names, slow ones
included) and reports whether a test failed. It first runs the same tests
unmutated, which must pass. Not run by CI (each mutation runs the tests once).

Usage, from the repository root, in the project's environment::

    python tools/mutations.py                # every mutation, two at a time
    python tools/mutations.py --jobs 1 crop_reflect_padding no_flip
    python tools/mutations.py --list

Exit status 0 when every mutation is caught, 1 otherwise.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ("tests/test_pairing.py", "tests/test_paper_constants.py", "tests/test_golden.py",
         "tests/augment/test_normalization.py", "tests/test_recipe.py",
         "tests/augment/test_affine.py", "tests/augment/test_autoaugment.py",
         "tests/model/test_layers.py", "tests/model/test_vit.py")
COPIED = ("ablation", "conf", "hydra_plugins", "tests", "tools", "pyproject.toml",
          "run_sweep.py")


def _official_checks(model: str, *own: str) -> tuple[str, ...]:
    """A model's checks against the official code (its fast tests), ``own`` its own."""
    return tuple(f"tests/model/test_{model}.py::test_{name}" for name in (
        "parameter_counts_are_the_official_ones", "official_weights_give_the_official_logits",
        "every_initial_parameter_is_drawn_as_the_official", *own))


PIT_TESTS = _official_checks("pit", "the_lsa_mask_removes_self_attention_in_every_stage")
SWIN_TESTS = _official_checks("swin", "the_lsa_mask_removes_each_windows_diagonal_in_every_stage",
                              "stochastic_depth_rises_linearly_over_the_blocks")
T2T_TESTS = _official_checks(
    "t2t", "the_lsa_mask_removes_self_attention_in_every_attention",
    "the_blocks_drop_paths_rise_linearly_and_the_probe_reads_every_attention")
CAIT_TESTS = _official_checks(
    "cait", "layer_scale_starts_as_the_official_by_position_in_its_stack",
    "the_default_mask_is_not_the_official_one",
    "the_lsa_mask_removes_self_attention_in_the_patch_stage_only")
BUDGET_TEST = "tests/launchers/test_tuned_sweep.py::test_a_failed_trial_counts_against_its_variants_budget"


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str
    old: str
    new: str
    what: str
    tests: tuple[str, ...] = ()   # the tests that must catch it, slow ones too (default: TESTS)


MUTATIONS = (
    # --- per-image augmentation (ablation/augment/official.py)
    Mutation("crop_reflect_padding", "ablation/augment/official.py",
             "padded = np.pad(image, ((padding, padding), (padding, padding), (0, 0)))",
             "padded = np.pad(image, ((padding, padding), (padding, padding), (0, 0)), "
             "mode='reflect')",
             "the crop pads by reflection instead of zeros"),
    Mutation("no_flip", "ablation/augment/official.py",
             "if self.horizontal_flip and rng.random() < 0.5:",
             "if self.horizontal_flip and rng.random() < 0.0:",
             "no image is flipped"),
    Mutation("flip_probability", "ablation/augment/official.py",
             "if self.horizontal_flip and rng.random() < 0.5:",
             "if self.horizontal_flip and rng.random() < 0.6:",
             "60 % of the images are flipped"),
    Mutation("crop_offset_range", "ablation/augment/official.py",
             "top, left = rng.integers(0, 2 * padding + 1, size=2)",
             "top, left = rng.integers(0, 2 * padding, size=2)",
             "the crop never takes the last offset"),
    Mutation("erasing_probability_doubled", "ablation/augment/official.py",
             "self.random_erasing = float(random_erasing or 0.0)",
             "self.random_erasing = 2 * float(random_erasing or 0.0)",
             "random erasing twice as often"),
    Mutation("erasing_fill_zero", "ablation/augment/official.py",
             "out[top:top + h, left:left + w] = self.fill",
             "out[top:top + h, left:left + w] = 0.0",
             "the erased box is black instead of the official fill"),
    Mutation("erasing_fill_raw_mean", "ablation/augment/official.py",
             "fill = statistics.mean + statistics.std * statistics.mean / PIXEL_RANGE",
             "fill = statistics.mean",
             "the erased box is the raw channel mean (normalises to 0)"),
    Mutation("erasing_aspect_square", "ablation/augment/official.py",
             "aspect = rng.uniform(ratio, 1.0 / ratio)",
             "aspect = math.exp(rng.uniform(math.log(ratio), -math.log(ratio)))",
             "the erasing aspect is log-uniform (square-biased) instead of uniform"),
    Mutation("erasing_area_range", "ablation/augment/official.py",
             "area=(0.02, 0.4)", "area=(0.02, 0.33)",
             "the erasing area's upper end is 0.33 instead of 0.4"),
    Mutation("autoaugment_sign_always_positive", "ablation/augment/official.py",
             "sign = 1 if rng.random() < 0.5 else -1",
             "sign = 1 if rng.random() < 2.0 else -1",
             "AutoAugment magnitudes are never negated"),
    Mutation("autoaugment_probability_ignored", "ablation/augment/official.py",
             "if rng.random() < probability:", "if rng.random() < 1.0:",
             "each sub-policy operation always applies"),
    Mutation("magnitude_table_shifted", "ablation/augment/official.py",
             '"shear_x": np.linspace(0, 0.3, 10), "shear_y": np.linspace(0, 0.3, 10),',
             '"shear_x": np.linspace(0, 0.3, 11)[1:], "shear_y": np.linspace(0, 0.3, 11)[1:],',
             "the shear magnitudes are off by one index"),
    # --- PIL's operations (ablation/augment/pil_ops.py)
    Mutation("shear_summed_weights", "ablation/augment/pil_ops.py",
             "return v2 + d * (p2 + d * (p3 + d * p4))",
             "return v2 + d * p2 + d * d * p3 + d * d * d * p4",
             "the bicubic cubic summed term by term instead of PIL's Horner order"),
    Mutation("posterize_bits", "ablation/augment/pil_ops.py",
             "return image & np.uint8((0xFF << (8 - int(bits))) & 0xFF)",
             "return image & np.uint8((0xFF << (7 - int(bits))) & 0xFF)",
             "posterize keeps one bit more"),
    Mutation("solarize_threshold_truncated", "ablation/augment/pil_ops.py",
             "return np.where(image < threshold, image, 255 - image).astype(np.uint8)",
             "return np.where(image < int(threshold), image, 255 - image).astype(np.uint8)",
             "solarize truncates its (fractional) threshold"),
    Mutation("brightness_rounds", "ablation/augment/pil_ops.py",
             "return np.clip(out, 0, 255).astype(np.uint8)  # float -> uint8 truncates, as PIL's cast",
             "return np.clip(np.rint(out), 0, 255).astype(np.uint8)",
             "blends round instead of truncating"),
    # --- mixing (ablation/data/batches.py)
    Mutation("cutmix_box_unclipped_centre", "ablation/data/batches.py",
             "cy, cx = int(rng.integers(height)), int(rng.integers(width))",
             "cy, cx = (int(rng.integers(half_h, height - half_h + 1)), "
             "int(rng.integers(half_w, width - half_w + 1)))",
             "the CutMix box is centred so that it is never clipped"),
    Mutation("cutmix_target_uses_lambda", "ablation/data/batches.py",
             "lam = 1.0 - (bottom - top) * (right - left) / (images.shape[1] * images.shape[2])",
             "pass",
             "CutMix targets use the drawn lambda, not the pasted share"),
    Mutation("mixing_probability", "ablation/data/batches.py",
             "if not kinds or rng.random() >= self.probability:",
             "if not kinds or rng.random() >= min(1.0, 2 * self.probability):",
             "batches are mixed twice as often"),
    Mutation("mixup_weight_per_image", "ablation/data/batches.py",
             "mixed = lam * images + (1.0 - lam) * images[order]",
             "lam = rng.beta(alpha, alpha, (len(images), 1, 1, 1)); "
             "mixed = lam * images + (1.0 - lam) * images[order]; lam = lam.reshape(-1, 1)",
             "Mixup draws one weight per image instead of one per batch"),
    # --- normalisation (ablation/augment/normalization.py)
    Mutation("normalisation_float32", "ablation/augment/normalization.py",
             'return ChannelStatistics(mean, np.sqrt(squares / count), "adapted")',
             "axes = tuple(range(images.ndim - 1)); x32 = np.asarray(images, np.float32)\n"
             '    return ChannelStatistics(x32.mean(axis=axes), x32.std(axis=axes), "adapted")',
             "the statistics are float32 reductions (they saturate at CIFAR size)"),
    Mutation("normalisation_keras_adapt", "ablation/augment/normalization.py",
             "if not isinstance(data, np.ndarray) or tuple(self.axis) != (-1,):",
             "if True:",
             "the layer's adapt falls back to keras's float32 statistics"),
    Mutation("official_constants_ignored", "ablation/augment/normalization.py",
             'if choice == "official":', 'if choice == "never":',
             "the paper presets adapt statistics instead of the official constants"),
    # --- initialisation (ablation/model/init.py)
    Mutation("patch_embedding_uniform", "ablation/model/init.py",
             'if path.endswith("/kernel") and len(shape) == 2:',
             'if path.endswith("/kernel") and len(shape) == 2 and "patch_tokenizer" in path:\n'
             '            limit = np.sqrt(6.0 / (shape[0] + shape[1]))\n'
             '            return rng.uniform(-limit, limit, shape)\n'
             '        if path.endswith("/kernel") and len(shape) == 2:',
             "the patch embedding is Glorot-uniform instead of xavier-normal"),
    Mutation("qkv_own_fans", "ablation/model/init.py",
             "return _xavier_normal(rng, shape, shape[0], fused * shape[1])",
             "return _xavier_normal(rng, shape, shape[0], shape[1])",
             "q/k/v drawn with their own fans instead of the fused matrix's"),
    Mutation("position_embedding_small", "ablation/model/init.py",
             'if path.endswith(("class_token/token", "position_embedding/embedding",',
             'if path.endswith(("class_token/token", "position_embedding/embedding")):\n'
             '            return 0.02 * rng.standard_normal(shape)\n'
             '        if path.endswith(("class_token/token", "position_embedding/embedding",',
             "class token and position embedding with std 0.02 instead of 1"),
    # --- model (ablation/model)
    Mutation("spt_shift_order", "ablation/model/tokenizer.py",
             '"left-up": (1, 1),\n    "left-down": (-1, 1),',
             '"left-up": (-1, 1),\n    "left-down": (1, 1),',
             "SPT stacks two of its shifted copies in the other order"),
    Mutation("lsa_mask_weak", "ablation/model/attention.py",
             "else -1e9", "else -1.0",
             "the diagonal mask is a small bias, not a hard mask"),
    Mutation("temperature_init", "ablation/model/attention.py",
             "else 1.0 / math.sqrt(self._scale_width))",
             "else 1.0 / self._scale_width)",
             "the multiplicative temperature starts at 1/key_dim"),
    Mutation("layer_norm_epsilon", "conf/model/paper.yaml",
             "layer_norm_epsilon: 1.0e-5", "layer_norm_epsilon: 1.0e-6",
             "LayerNorm epsilon 1e-6 instead of torch's 1e-5"),
    # --- CaiT (ablation/model/cait.py unless named; tests/model/test_cait.py)
    *(Mutation(f"cait_{name}", file or "ablation/model/cait.py", old, new, what, CAIT_TESTS)
      for name, old, new, what, file in (
        ("layer_scale_by_network_depth",
         'layer_scale=layer_scale_init(i + 1),\n                                   name=f"block_{i}"',
         'layer_scale=layer_scale_init(depth),\n                                   name=f"block_{i}"',
         "every patch block's LayerScale starts at the network depth's value (1e-5), not "
         "its position's", None),
        ("class_layer_scale_after_the_patch_stage",
         "layer_scale=layer_scale_init(i + 1),\n                                 class_attention",
         "layer_scale=layer_scale_init(depth + i + 1),\n                                 "
         "class_attention",
         "the class blocks' LayerScale counted on after the patch stage (1e-6)", None),
        ("layer_scale_small", "return 0.1", "return 0.01",
         "LayerScale starts at 0.01 in the first 18 blocks of a stage", None),
        ("kv_own_fans", "QKV_FUSED = (1, 2, 2)", "QKV_FUSED = (1, 1, 1)",
         "k and v drawn with their own fans, not the fused to_kv's", None),
        ("qkv_fused_as_vit", "QKV_FUSED = (1, 2, 2)", "QKV_FUSED = (3, 3, 3)",
         "q, k and v drawn with the ViT's fused to_qkv fans", None),
        ("talking_heads_half",
         'if path.endswith(("class_token/token", "position_embedding/embedding",',
         'if path.endswith("softmax_mixing"):\n'
         "            return 0.5 * rng.standard_normal(shape)\n"
         '        if path.endswith(("class_token/token", "position_embedding/embedding",',
         "the talking-heads matrices drawn with sd 0.5, not standard normal",
         "ablation/model/init.py"))),
    # --- PiT (ablation/model/pit.py unless named; tests/model/test_pit.py)
    *(Mutation(f"pit_{name}", file or "ablation/model/pit.py", old, new, what, PIT_TESTS)
      for name, old, new, what, file in (
        ("pooling_without_spt", "Pool(dim << stage, shifted=spt,",
         "Pool(dim << stage, shifted=False,",
         "with spt, the pooling stays the official Pool (SPT on the patches only)", None),
        ("spt_first_pooling_only", "Pool(dim << stage, shifted=spt,",
         "Pool(dim << stage, shifted=spt and stage == 1,",
         "with spt, SPT replaces the first pooling only", None),
        ("pool_grid_transposed", "grid = ops.reshape(tokens[:, 1:], (-1, side, side, width))",
         "grid = ops.transpose(ops.reshape(tokens[:, 1:], (-1, side, side, width)), "
         "(0, 2, 1, 3))", "the pooling reads the token grid column by column", None),
        ("pool_padding_after", "ops.pad(grid, [[0, 0], [1, 1], [1, 1], [0, 0]])",
         "ops.pad(grid, [[0, 0], [0, 2], [0, 2], [0, 0]])",
         "the pooling convolution pads after the grid only, not one each side", None),
        ("lsa_first_stage_only", "dict(attention, num_heads=num_heads << stage)",
         "dict(attention, num_heads=num_heads << stage, mask_diagonal=lsa and not stage)",
         "the LSA diagonal mask is missed after the first pooling", None),
        ("heads_not_doubled", "dict(attention, num_heads=num_heads << stage)",
         "dict(attention, num_heads=num_heads)", "every stage has the first stage's heads",
         None),
        ("patch_conv_linear_fans", "conv = patch_kernel ** 2 if", "conv = 1 if",
         "the plain patch embedding drawn with a Linear's fans, not its Conv2d's",
         "ablation/model/init.py"),
        ("depthwise_fans", "area * shape[2] * shape[3]", "area * shape[3]",
         "the depthwise pooling kernel drawn with one group's fan-out",
         "ablation/model/init.py"),
        ("depthwise_weights_order", ".reshape(dim, -1, 3, 3).transpose(2, 3, 0, 1)",
         ".reshape(-1, dim, 3, 3).transpose(2, 3, 1, 0)",
         "official depthwise weights loaded multiplier-major",
         "ablation/model/official_weights.py"),
        ("depth_moved", "depth: [2, 6, 4]", "depth: [2, 6, 3]",
         "3 blocks instead of 4 in PiT's last stage", "conf/model/pit.yaml"))),
    # --- T2T (ablation/model/t2t.py unless named; tests/model/test_t2t.py)
    *(Mutation(f"t2t_{name}", file or "ablation/model/t2t.py", old, new, what, T2T_TESTS)
      for name, old, new, what, file in (
        ("shift_two_pixels", "shift_and_stack(images, 1) if", "shift_and_stack(images, 2) if",
         "with spt, the image shifted by two pixels instead of one", None),
        ("shift_after_first_split",
         "grid, splits = shift_and_stack(images, 1) if self.shifted else images, []\n"
         "        for block in self.token_transformers:\n"
         "            rows, cols = (grid.shape[1] + 1) // 2, (grid.shape[2] + 1) // 2\n"
         "            splits.append(soft_split(grid))\n",
         "grid, splits = images, []\n"
         "        for block in self.token_transformers:\n"
         "            rows, cols = (grid.shape[1] + 1) // 2, (grid.shape[2] + 1) // 2\n"
         "            split = ops.reshape(soft_split(grid), (-1, rows, cols, 9 * grid.shape[3]))\n"
         "            if self.shifted and block is self.token_transformers[0]:\n"
         "                split = shift_and_stack(split, 1)\n"
         "            splits.append(ops.reshape(split, (-1, rows * cols, split.shape[3])))\n",
         "with spt, the shift stacks the first soft split's windows, not the image", None),
        ("token_lsa_missed", "dict(self.attention, num_heads=1,",
         "dict(self.attention, mask_diagonal=False, num_heads=1,",
         "the LSA diagonal mask is missed in the token transformers", None),
        ("token_scale_from_key_dim", "scale_dim=features)", "scale_dim=None)",
         "the token transformers scale by key_dim, not their input width", None),
        ("soft_split_kernel_major", "ops.stack(windows, axis=-1)", "ops.stack(windows, axis=-2)",
         "a soft split's features window-position-major, not channel-major", None),
        ("soft_split_pads_after", "ops.pad(grid, [[0, 0], [1, 1], [1, 1], [0, 0]])",
         "ops.pad(grid, [[0, 0], [0, 2], [0, 2], [0, 0]])",
         "a soft split pads after the grid only, not one each side", None),
        ("no_normed_skip", "if self.attention.num_heads == 1 else normed",
         "if self.attention.num_heads == 1 else 0.0",
         "the blocks' attention without the official Attention's own skip", None),
        ("drop_path_constant", "drop_path=drop_path * i / max(depth - 1, 1)",
         "drop_path=drop_path", "every block's stochastic depth 0.1, not rising from 0", None),
        ("sinusoid_swapped", "np.where(np.arange(width) % 2, np.cos(angles), np.sin(angles))",
         "np.where(np.arange(width) % 2, np.sin(angles), np.cos(angles))",
         "the position table's sin and cos swapped", None),
        ("init_xavier", "normal_std=0.02)", "normal_std=None)",
         "Linear layers xavier-normal as the ViT's, not trunc-normal 0.02", None),
        ("spt_weights_channel_major",
         ".reshape(len(SPT_ORDER), 3, 9)[list(SPT_ORDER)]",
         ".reshape(3, len(SPT_ORDER), 9)[:, list(SPT_ORDER)]",
         "official SPT weights of the first token transformer read channel-major",
         "ablation/model/official_weights.py"),
        ("depth_moved", "depth: 12", "depth: 11", "11 blocks instead of 12",
         "conf/model/t2t.yaml"))),
    # --- Swin (ablation/model/swin.py unless named; tests/model/test_swin.py)
    *(Mutation(f"swin_{name}", file or "ablation/model/swin.py", old, new, what, SWIN_TESTS)
      for name, old, new, what, file in (
        ("window_diagonal_first_stage_only", "dict(attention, num_heads=num_heads << stage)",
         "dict(attention, num_heads=num_heads << stage, mask_diagonal=lsa and not stage)",
         "the LSA diagonal mask is missed in the windows after the first merging", None),
        ("merging_without_spt", 'name=f"merge_{stage}") if spt else',
         'name=f"merge_{stage}") if False else',
         "with spt, every merging stays the plain one (SPT on the patches only)", None),
        ("spt_first_merging_only", 'name=f"merge_{stage}") if spt else',
         'name=f"merge_{stage}") if spt and stage == 1 else',
         "with spt, SPT replaces the first merging only", None),
        ("odd_blocks_not_rolled", "window // 2 if i % 2 and side > window_size else 0",
         "0", "no block attends on the rolled grid", None),
        ("even_blocks_rolled", "window // 2 if i % 2 and side > window_size else 0",
         "window // 2 if i % 2 == 0 and side > window_size else 0",
         "the even blocks of a stage roll the grid, not the odd ones", None),
        ("one_window_grid_rolled", "window // 2 if i % 2 and side > window_size else 0",
         "window // 2 if i % 2 and side >= window_size else 0",
         "a grid of one window is rolled too", None),
        ("rolled_forward_twice", "(-1, self.side, self.side, dim)), -1)",
         "(-1, self.side, self.side, dim)), 1)",
         "the grid is rolled forward into the windows, not back", None),
        ("relative_index_transposed", "dy = rows[:, None] - rows[None, :] + window - 1",
         "dy = rows[None, :] - rows[:, None] + window - 1",
         "the relative bias reads the key's row offset from the query, not the query's", None),
        ("relative_index_window_transposed",
         "rows, cols = np.divmod(np.arange(window * window), window)",
         "cols, rows = np.divmod(np.arange(window * window), window)",
         "the relative bias indexed as if each window were transposed", None),
        ("roll_mask_off", "ROLL_MASK = -100.0", "ROLL_MASK = 0.0",
         "tokens a roll brings together from apart attend to each other", None),
        ("merging_row_major", "(0, 1, 3, 4, 2, 5)", "(0, 1, 3, 2, 4, 5)",
         "the plain merging concatenates a neighbourhood row by row, not as the official",
         None),
        ("drop_path_constant", "np.linspace(0.0, drop_path, sum(depth))",
         "np.full(sum(depth), drop_path)",
         "stochastic depth 0.1 in every block, not rising from 0", None),
        ("linear_init_fan_out", "bound = 1.0 / np.sqrt(kernel[0])",
         "bound = 1.0 / np.sqrt(kernel[1])",
         "torch's Linear draws bounded by the fan-out, not the fan-in",
         "ablation/model/init.py"),
        ("qkv_without_bias", "qkv_bias: true", "qkv_bias: false",
         "the q/k/v projections without their official biases", "conf/model/swin.yaml"))),
    # --- optimizer and schedule
    Mutation("adamw_keras_epsilon", "conf/trainer/paper.yaml",
             "epsilon_form: torch", "epsilon_form: keras",
             "the paper preset adds AdamW's epsilon where Keras does"),
    Mutation("adamw_no_bias_correction", "ablation/train/optimizer.py",
             "denominator = ops.add(ops.divide(ops.sqrt(v), root_correction_2), self.epsilon)",
             "denominator = ops.add(ops.sqrt(v), self.epsilon)",
             "the torch form forgets the second moment's bias correction"),
    Mutation("label_smoothing_off", "conf/trainer/paper.yaml",
             "label_smoothing: 0.1", "label_smoothing: 0.0",
             "the paper preset trains without label smoothing"),
    # --- what pairing by seed rests on: draws of (seed, epoch) alone (tests/test_pairing.py)
    Mutation("order_ignores_seed", "ablation/data/batches.py",
             "rng = np.random.default_rng([self.seed, self.epoch])",
             "rng = np.random.default_rng([0, self.epoch])",
             "the batch order is the same for every seed"),
    Mutation("order_depends_on_variant", "ablation/train/inputs.py",
             'int(config["seed"]), initial_epoch=initial_epoch',
             'int(config["seed"]) + int(config["spt"]), initial_epoch=initial_epoch',
             "the training input's draws depend on a switch"),
    Mutation("keras_shuffles_the_arrays", "ablation/train/inputs.py",
             "    from ablation.data.batches import training_batches\n\n    return dict(",
             "    from ablation.data.batches import training_batches\n\n"
             '    trainer, augmentation = config["trainer"], config["augmentation"]\n'
             '    if not (pad or trainer["passes_per_epoch"] > 1\n'
             '            or trainer["label_smoothing"] > 0\n'
             '            or augmentation["mixing"]["probability"] > 0\n'
             '            or augmentation["implementation"] == "official"):\n'
             "        return dict(x=data.x_train, y=data.y_train, shuffle=True,\n"
             '                    batch_size=int(trainer["batch_size"]))\n'
             "    return dict(",
             "a recipe without augmentation or mixing is shuffled by Keras: one order every epoch"
             " on TensorFlow"),
    Mutation("augmentation_key_ignores_epoch", "ablation/data/batches.py",
             "(self.seed, self.epoch, index, 1)", "(self.seed, 0, index, 1)",
             "every epoch augments its k-th batch with the same draws"),
    Mutation("augmentation_key_ignores_seed", "ablation/data/batches.py",
             "(self.seed, self.epoch, index, 1)", "(0, self.epoch, index, 1)",
             "every seed augments with the same draws"),
    Mutation("mixing_key_ignores_epoch", "ablation/data/batches.py",
             "key=(self.seed, self.epoch, index)", "key=(self.seed, 0, index)",
             "every epoch mixes its k-th batch with the same draws"),
    Mutation("mixing_key_ignores_seed", "ablation/data/batches.py",
             "key=(self.seed, self.epoch, index)", "key=(0, self.epoch, index)",
             "every seed mixes with the same draws"),
    Mutation("validation_split_ignores_seed", "ablation/data/datasets.py",
             "order = np.random.default_rng(seed).permutation(len(x_train))",
             "order = np.random.default_rng(0).permutation(len(x_train))",
             "every seed holds out the same validation images"),
    Mutation("split_cache_ignores_seed", "ablation/data/datasets.py",
             "key = (json.dumps(dict(cfg), sort_keys=True, default=str), int(seed))",
             "key = (json.dumps(dict(cfg), sort_keys=True, default=str), 0)",
             "the next job of a sweep reuses the last seed's validation split"),
    Mutation("layer_seed_ignores_run_seed", "ablation/augment/chain.py",
             "return (int(seed) * 1_000_003", "return (0 * int(seed) * 1_000_003",
             "the in-model augmentation draws the same for every seed"),
    # --- a moved constant of the paper presets (tests/test_paper_constants.py)
    Mutation("epochs_moved", "conf/trainer/paper.yaml", "epochs: 100", "epochs: 90",
             "90 epochs instead of 100"),
    Mutation("warmup_moved", "conf/trainer/paper.yaml", "warmup_epochs: 10\n",
             "warmup_epochs: 5\n", "5 warm-up epochs instead of 10"),
    Mutation("batch_size_moved", "conf/trainer/paper.yaml", "batch_size: 128",
             "batch_size: 256", "batches of 256 instead of 128"),
    Mutation("learning_rate_moved", "conf/trainer/paper.yaml", "learning_rate: 0.001 ",
             "learning_rate: 0.002 ", "peak learning rate 2e-3 instead of 1e-3"),
    Mutation("min_learning_rate_moved", "conf/trainer/paper.yaml",
             "min_learning_rate: 1.0e-6", "min_learning_rate: 1.0e-5",
             "the schedule's floor 1e-5 instead of 1e-6"),
    Mutation("weight_decay_moved", "conf/trainer/paper.yaml", "weight_decay: 0.05",
             "weight_decay: 0.1", "weight decay 0.1 instead of 0.05"),
    Mutation("weight_decay_scope", "ablation/train/optimizer.py",
             "class TorchFormAdamW(OncePerStep, keras.optimizers.AdamW):\n",
             "class TorchFormAdamW(OncePerStep, keras.optimizers.AdamW):\n"
             "    def _use_weight_decay(self, variable):\n"
             "        return (not variable.path.endswith(('/bias', '/gamma', '/beta'))\n"
             "                and super()._use_weight_decay(variable))\n\n",
             "biases and LayerNorm parameters are not decayed"),
    Mutation("adamw_epsilon_moved", "conf/trainer/paper.yaml", "optimizer_epsilon: 1.0e-8",
             "optimizer_epsilon: 1.0e-7", "AdamW's epsilon 1e-7 instead of torch's 1e-8"),
    Mutation("passes_moved", "conf/trainer/paper.yaml", "passes_per_epoch: 3 ",
             "passes_per_epoch: 2 ", "repeated augmentation x2 instead of x3"),
    Mutation("crop_padding_moved", "conf/augmentation/paper.yaml", "crop_padding: 4",
             "crop_padding: 2", "the crop pads 2 pixels instead of 4"),
    Mutation("flip_off", "conf/augmentation/paper.yaml", "horizontal_flip: true",
             "horizontal_flip: false", "no horizontal flip"),
    Mutation("mixing_probability_moved", "conf/augmentation/paper.yaml", "probability: 0.5 ",
             "probability: 0.3 ", "a batch is mixed with probability 0.3 instead of 0.5"),
    Mutation("mixup_alpha_moved", "conf/augmentation/paper.yaml", "mixup_alpha: 1.0",
             "mixup_alpha: 0.8", "Mixup's alpha 0.8 instead of 1"),
    Mutation("cutmix_beta_moved", "conf/augmentation/paper.yaml", "cutmix_alpha: 1.0",
             "cutmix_alpha: 0.8", "CutMix's beta 0.8 instead of 1"),
    Mutation("cutmix_mixup_unequal", "ablation/data/batches.py",
             "return kinds[int(rng.integers(len(kinds)))]",
             "return kinds[int(rng.random() < 0.7) % len(kinds)]",
             "a mixed batch is Mixup 70 % of the time instead of half"),
    Mutation("erasing_probability_moved", "conf/augmentation/paper.yaml",
             "random_erasing: 0.25", "random_erasing: 0.35",
             "random erasing with probability 0.35 instead of 0.25"),
    Mutation("erasing_area_lower_bound", "ablation/augment/official.py",
             "area=(0.02, 0.4)", "area=(0.03, 0.4)",
             "the erasing area's lower end is 0.03 instead of 0.02"),
    Mutation("erasing_area_upper_bound", "ablation/augment/official.py",
             "area=(0.02, 0.4)", "area=(0.02, 0.37)",
             "the erasing area's upper end is 0.37 instead of 0.4"),
    Mutation("erasing_aspect_range", "ablation/augment/official.py",
             "ratio: float = 0.3", "ratio: float = 0.4",
             "the erasing aspect is drawn in [0.4, 2.5] instead of [0.3, 3.33]"),
    Mutation("erasing_tries", "ablation/augment/official.py",
             "for _ in range(100):", "for _ in range(10):",
             "random erasing gives up after 10 tries instead of 100"),
    Mutation("policy_magnitude_moved", "ablation/augment/official.py",
             '(("invert", 0.1, 7), ("contrast", 0.2, 6)),',
             '(("invert", 0.1, 7), ("contrast", 0.2, 5)),',
             "one AutoAugment sub-policy at another magnitude"),
    Mutation("normalisation_constant_moved", "conf/dataset/cifar10.yaml",
             "mean: [0.4914, 0.4822, 0.4465]", "mean: [0.4914, 0.4822, 0.4466]",
             "a CIFAR-10 normalisation mean off by 1e-4"),
    Mutation("dim_moved", "conf/model/paper.yaml", "dim: 192", "dim: 128",
             "token width 128 instead of 192"),
    Mutation("depth_moved", "conf/model/paper.yaml", "depth: 9", "depth: 8",
             "8 blocks instead of 9"),
    Mutation("heads_moved", "conf/model/paper.yaml", "num_heads: 12", "num_heads: 8",
             "8 heads instead of 12"),
    Mutation("dim_head_moved", "conf/model/paper.yaml", "key_dim: 16", "key_dim: 24",
             "24 dimensions per head instead of 16"),
    Mutation("mlp_ratio_moved", "conf/model/paper.yaml", "mlp_hidden_units: [384]",
             "mlp_hidden_units: [576]", "MLP ratio 3 instead of 2"),
    Mutation("patch_size_moved", "conf/model/paper.yaml", "patch_size: ${div:${.image_size},8}",
             "patch_size: ${div:${.image_size},16}",
             "patches of image side / 16 instead of / 8 (2 pixels on 32 px images)"),
    Mutation("tiny_imagenet_patch_size_moved", "conf/experiment/paper_tiny_imagenet.yaml",
             "model:\n  image_size: 64", "model:\n  image_size: 32",
             "the paper models sized for 32 px on 64 px images (patches of 4 pixels, not 8)"),
    Mutation("drop_path_moved", "conf/model/paper.yaml", "drop_path: 0.1", "drop_path: 0.2",
             "stochastic depth 0.2 instead of 0.1"),
    Mutation("dropout_on", "conf/model/paper.yaml", "\ndropout: 0.0", "\ndropout: 0.1",
             "dropout 0.1 in the MLP instead of none"),
    Mutation("dropout_place_in_mlp", "ablation/model/layers.py",
             "        for dense in self.dense_layers:\n"
             "            x = self.dropout_layer(dense(x), training=training)\n"
             "        return x",
             "        for dense in self.dense_layers[:-1]:\n"
             "            x = self.dropout_layer(dense(x), training=training)\n"
             "        return self.dense_layers[-1](x)",
             "the MLP drops after its hidden layer only, not after its output layer"),
    Mutation("qkv_bias_on", "conf/model/paper.yaml", "qkv_bias: false", "qkv_bias: true",
             "q/k/v projections with biases"),
    # --- a tuned sweep's budget: a failed trial is one trial (tests/test_tuning.py)
    Mutation("budget_ignores_failed_trials", "hydra_plugins/vit_ablation/search.py",
             "self._trials(study_id, ranges, (states.COMPLETE, states.FAIL))",
             "self._trials(study_id, ranges, (states.COMPLETE,))",
             "a failed trial does not count: its variant gets one more", tests=(BUDGET_TEST,)),
    Mutation("budget_counts_failed_twice", "hydra_plugins/vit_ablation/search.py",
             "return sum(1 for t in self._trials(study_id, ranges,",
             "return sum(2 if t.state == states.FAIL else 1 for t in "
             "self._trials(study_id, ranges,",
             "a failed trial counts twice: its variant gets one fewer", tests=(BUDGET_TEST,)),
    Mutation("failed_trial_never_told", "hydra_plugins/vit_ablation/tuned_sweep.py",
             'if status in ("completed", "failed"):', 'if status == "completed":',
             "the search is not told of a failed trial (it runs it again and again)",
             tests=(BUDGET_TEST,)),
    Mutation("failed_trial_fails_the_sweep", "hydra_plugins/vit_ablation/tuned_sweep.py",
             '"see its run.json")\n                    continue\n',
             '"see its run.json")\n',
             "a diverged trial makes the tuned sweep exit 1", tests=(BUDGET_TEST,)),
)


def copy_checkout(destination: Path) -> None:
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, destination / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, destination / name)


def apply(mutation: Mutation, checkout: Path) -> None:
    path = checkout / mutation.file
    text = path.read_text()
    count = text.count(mutation.old)
    if count != 1:
        raise SystemExit(f"mutation {mutation.name}: its text occurs {count} times in "
                         f"{mutation.file}, not once: update tools/mutations.py")
    path.write_text(text.replace(mutation.old, mutation.new))


def run_tests(checkout: Path, tests: tuple[str, ...] = ()) -> tuple[int, str]:
    """(exit status, the first failing test or the output's tail) of ``tests`` in
    ``checkout``, slow ones included; by default the fast lane of ``TESTS``."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONDONTWRITEBYTECODE": "1"}
    lane = () if tests else ("-m", "not slow")
    command = [sys.executable, "-m", "pytest", *(tests or TESTS), "-x", "-q", "-n", "0", *lane,
               "-p", "no:cacheprovider", "--no-header", "-o", "addopts="]
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    failed = [line.split(" ", 1)[1] for line in done.stdout.splitlines()
              if line.startswith(("FAILED ", "ERROR "))]
    return done.returncode, (failed[0] if failed else done.stdout.strip().splitlines()[-1:][0]
                             if done.stdout.strip() else done.stderr[-500:])


def check(mutation: Mutation | None, tests: tuple[str, ...] = ()
          ) -> tuple[str, bool, str, float]:
    """(name, caught, detail, seconds) of ``mutation`` (None: unmutated) against its own
    tests, else ``tests``, else the fast lane of ``TESTS``."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mutation-") as folder:
        checkout = Path(folder)
        copy_checkout(checkout)
        if mutation is not None:
            apply(mutation, checkout)
        imported = subprocess.run(
            [sys.executable, "-c", "import ablation, hydra_plugins.vit_ablation as plugins; "
             "print(ablation.__file__); print(plugins.__file__)"], cwd=checkout,
            env={**os.environ, "PYTHONPATH": str(checkout)}, capture_output=True, text=True)
        paths = imported.stdout.split()
        if len(paths) != 2 or not all(p.startswith(str(checkout)) for p in paths):
            raise SystemExit(f"the copy's tests would import the suite from "
                             f"{imported.stdout.strip() or imported.stderr[-300:]}")
        status, detail = run_tests(checkout, (mutation.tests if mutation else ()) or tests)
    name = mutation.name if mutation else "(unmutated)"
    if status not in (0, 1):   # not a failing test: a collection or usage error
        raise SystemExit(f"{name}: pytest exited {status} ({detail}): fix the mutation")
    caught = status == 1
    return name, caught, detail, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutations to run (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="mutations tested at once")
    parser.add_argument("--list", action="store_true", help="list the mutations and stop")
    args = parser.parse_args(argv)
    if args.list:
        for m in MUTATIONS:
            print(f"{m.name:34s} {m.file:36s} {m.what}")
        return 0
    known = {m.name: m for m in MUTATIONS}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"unknown mutation(s): {', '.join(unknown)} (see --list)")
    chosen = [known[n] for n in args.names] or list(MUTATIONS)
    for m in chosen:   # every text applies before anything runs
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / m.file).parent.mkdir(parents=True)
            shutil.copy2(ROOT / m.file, Path(folder) / m.file)
            apply(m, Path(folder))
    own = tuple(sorted({test for m in chosen for test in m.tests}))
    for tests in ((), *((own,) if own else ())):
        name, failed, detail, seconds = check(None, tests)
        if failed:
            print(f"the unmutated tests fail ({detail}): fix them first", file=sys.stderr)
            return 2
        print(f"unmutated: pass ({seconds:.0f} s); tests: {' '.join(tests or TESTS)}")
    print(f"{len(chosen)} mutations")
    missed = []
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for name, caught, detail, seconds in pool.map(check, chosen):
            print(f"{'caught' if caught else 'MISSED':7s} {name:34s} {seconds:4.0f} s  {detail}",
                  flush=True)
            if not caught:
                missed.append(name)
    print(f"{len(chosen) - len(missed)} of {len(chosen)} mutations caught"
          + (f"; missed: {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
