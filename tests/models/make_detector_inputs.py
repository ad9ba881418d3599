#!/usr/bin/python3
"""A real photograph as the inputs of the generated detectors (tests/reference/test_*_ort.cpp).

  photo_yolo_640.npy  float32 [1, 3, 640, 640]: Ultralytics' letterbox (the image scaled to fit
                      640 keeping its aspect ratio, bilinear, padded with 114 on both sides),
                      RGB, / 255 (YOLOv8n's input range [0, 1]);
  photo_ssd_300.npy   float32 [1, 3, 300, 300]: the image stretched to 300 x 300 (bilinear, as
                      TF Object Detection API's fixed_shape_resizer and MLPerf's SSD-MobileNet
                      preprocessing do), RGB, (x - 127.5) / 127.5 (the model's range [-1, 1]).

The letterbox is make_seg_inputs.py's. Decoded and resized with Pillow (Debian `python3-pil`),
written with numpy: a pure function of the photograph, the same files on every run.

Usage: /usr/bin/python3 tests/models/make_detector_inputs.py IMAGE.jpg OUT_DIR
"""

import os
import sys

import numpy as np
from PIL import Image

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_seg_inputs import letterbox  # noqa: E402  (the same letterbox, another padding)


def nchw(img):
    return np.asarray(img, dtype=np.float32).transpose(2, 0, 1)[np.newaxis].copy()


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: make_detector_inputs.py IMAGE.jpg OUT_DIR")
    img = Image.open(sys.argv[1]).convert("RGB")
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    yolo = nchw(letterbox(img, 640, 114)) / np.float32(255)  # pad 114 as Ultralytics' LetterBox
    ssd = (nchw(img.resize((300, 300), Image.BILINEAR)) - np.float32(127.5)) / np.float32(127.5)
    np.save(os.path.join(out, "photo_yolo_640.npy"), yolo.astype(np.float32))
    np.save(os.path.join(out, "photo_ssd_300.npy"), ssd.astype(np.float32))
    print(f"make_detector_inputs: {sys.argv[1]} -> {out}/photo_yolo_640.npy, photo_ssd_300.npy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
