"""ultralytics/yolov5 models/common.py + yolo.py, yolov5n (depth 0.33, width 0.25) as yolov5n.yaml
builds it: Conv (conv + BN + SiLU), C3 with Bottlenecks, SPPF, the PANet neck (nearest upsample,
concat) and Detect's 1×1 convs (inference: the raw maps, no grid decoding)."""
import torch
import torch.nn as nn


def autopad(k, p=None, d=1):
    if p is None:
        p = k // 2
    return p


class Conv(nn.Module):
    default_act = nn.SiLU()

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, d=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k, p, d), groups=g, dilation=d, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = self.default_act if act is True else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True, g=1, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_, c2, 3, 1, g=g)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        return x + self.cv2(self.cv1(x)) if self.add else self.cv2(self.cv1(x))


class C3(nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=True, g=1, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c1, c_, 1, 1)
        self.cv3 = Conv(2 * c_, c2, 1)
        self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut, g, e=1.0) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_ * 4, c2, 1, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class Detect(nn.Module):
    def __init__(self, nc=80, ch=(), na=3):
        super().__init__()
        self.no = nc + 5
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * na, 1) for x in ch)

    def forward(self, xs):
        return [m(x) for m, x in zip(self.m, xs)]


class YOLOv5n(nn.Module):
    def __init__(self, nc=80):
        super().__init__()
        self.b0 = Conv(3, 16, 6, 2, 2)
        self.b1 = Conv(16, 32, 3, 2)
        self.b2 = C3(32, 32, 1)
        self.b3 = Conv(32, 64, 3, 2)
        self.b4 = C3(64, 64, 2)
        self.b5 = Conv(64, 128, 3, 2)
        self.b6 = C3(128, 128, 3)
        self.b7 = Conv(128, 256, 3, 2)
        self.b8 = C3(256, 256, 1)
        self.b9 = SPPF(256, 256, 5)
        self.h10 = Conv(256, 128, 1, 1)
        self.up = nn.Upsample(None, 2, "nearest")
        self.h13 = C3(256, 128, 1, False)
        self.h14 = Conv(128, 64, 1, 1)
        self.h17 = C3(128, 64, 1, False)
        self.h18 = Conv(64, 64, 3, 2)
        self.h20 = C3(128, 128, 1, False)
        self.h21 = Conv(128, 128, 3, 2)
        self.h23 = C3(256, 256, 1, False)
        self.detect = Detect(nc, (64, 128, 256))

    def forward(self, x):
        x = self.b2(self.b1(self.b0(x)))
        p3 = self.b4(self.b3(x))
        p4 = self.b6(self.b5(p3))
        x = self.b9(self.b8(self.b7(p4)))
        h10 = self.h10(x)
        x = self.h13(torch.cat([self.up(h10), p4], 1))
        h14 = self.h14(x)
        out3 = self.h17(torch.cat([self.up(h14), p3], 1))
        out4 = self.h20(torch.cat([self.h18(out3), h14], 1))
        out5 = self.h23(torch.cat([self.h21(out4), h10], 1))
        return self.detect([out3, out4, out5])


MODEL = YOLOv5n
INPUT_SHAPE = (1, 3, 640, 640)
