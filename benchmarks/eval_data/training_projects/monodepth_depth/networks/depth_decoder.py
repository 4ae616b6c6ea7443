import torch
import torch.nn as nn
import torch.nn.functional as F


class DepthDecoder(nn.Module):
    def __init__(self, num_ch_enc, scales=range(4)):
        super().__init__()
        self.scales = scales
        num_ch_dec = [16, 32, 64, 128, 256]
        self.convs = nn.ModuleDict()
        for i in range(4, -1, -1):
            ch_in = num_ch_enc[-1] if i == 4 else num_ch_dec[i + 1]
            self.convs[f"up{i}0"] = nn.Conv2d(int(ch_in), num_ch_dec[i], 3, padding=1)
            ch_in = num_ch_dec[i] + (int(num_ch_enc[i - 1]) if i > 0 else 0)
            self.convs[f"up{i}1"] = nn.Conv2d(ch_in, num_ch_dec[i], 3, padding=1)
        for s in self.scales:
            self.convs[f"disp{s}"] = nn.Conv2d(num_ch_dec[s], 1, 3, padding=1)

    def forward(self, input_features):
        outputs = {}
        x = input_features[-1]
        for i in range(4, -1, -1):
            x = F.elu(self.convs[f"up{i}0"](x))
            x = [F.interpolate(x, scale_factor=2, mode="nearest")]
            if i > 0:
                x += [input_features[i - 1]]
            x = F.elu(self.convs[f"up{i}1"](torch.cat(x, 1)))
            if i in self.scales:
                outputs[("disp", i)] = torch.sigmoid(self.convs[f"disp{i}"](x))
        return outputs
