from torch import nn


class Tacotron2Loss(nn.Module):
    def forward(self, model_output, targets):
        mel_target, gate_target = targets[0], targets[1]
        mel_target.requires_grad = False
        gate_target.requires_grad = False
        mel_out, gate_out = model_output
        mel_loss = nn.MSELoss()(mel_out, mel_target)
        gate_loss = nn.BCEWithLogitsLoss()(gate_out.reshape(-1, 1), gate_target.reshape(-1, 1))
        return mel_loss + gate_loss
