#!/usr/bin/python3
"""Three deterministic uint8 NHWC inputs for a segmentation model with a square input.

  input_0.npy  a real photograph (../shared/models/images/car.jpg, 1200x605) scaled to the model
               width keeping its aspect ratio and padded top and bottom with 128, the value that
               DeepLab's preprocessing pads with (the real value 0 at zero point 128);
  input_1.npy  the same photograph mirrored, stretched to the full square, plus seeded Gaussian
               noise (numpy default_rng(1), sigma 8 levels), clipped to 0..255;
  input_2.npy  a seeded smooth random scene: a 9x9x3 grid of uniform random colours
               (default_rng(2)) enlarged with bicubic interpolation (large coloured blobs).

Images are decoded and resized with Pillow (Debian `python3-pil`), arrays written with numpy.
Everything is a pure function of the photograph and the seeds, so the files are the same on
every run.

Usage: /usr/bin/python3 tests/models/make_seg_inputs.py IMAGE.jpg SIZE OUT_DIR
"""

import os
import sys

import numpy as np
from PIL import Image


def letterbox(img, size, pad=128):
    """The image scaled to fit size x size keeping its aspect ratio (bilinear), centered on a
    canvas of grey `pad`; uint8 [size, size, 3]."""
    w, h = img.size
    scale = size / max(w, h)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    resized = img.resize((nw, nh), Image.BILINEAR)
    canvas = Image.new("RGB", (size, size), (pad, pad, pad))
    canvas.paste(resized, ((size - nw) // 2, (size - nh) // 2))
    return np.asarray(canvas, dtype=np.uint8)


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    image, size, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    os.makedirs(out_dir, exist_ok=True)
    img = Image.open(image).convert("RGB")
    x0 = letterbox(img, size)
    mirrored = img.transpose(Image.FLIP_LEFT_RIGHT).resize((size, size), Image.BILINEAR)
    noise = np.random.default_rng(1).normal(0.0, 8.0, size=(size, size, 3))
    x1 = np.clip(np.rint(np.asarray(mirrored, dtype=np.float64) + noise), 0, 255).astype(np.uint8)
    grid = np.random.default_rng(2).integers(0, 256, size=(9, 9, 3), dtype=np.uint8)
    x2 = np.asarray(Image.fromarray(grid, "RGB").resize((size, size), Image.BICUBIC), dtype=np.uint8)
    for i, x in enumerate((x0, x1, x2)):
        path = os.path.join(out_dir, f"input_{i}.npy")
        np.save(path, x[np.newaxis].copy())
        print(f"{path}: uint8 {list(x[np.newaxis].shape)} mean {x.mean():.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
