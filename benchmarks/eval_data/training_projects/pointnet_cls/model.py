import torch
import torch.nn as nn
import torch.nn.functional as F


class STN3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 64, 1)
        self.conv2 = nn.Conv1d(64, 1024, 1)
        self.fc = nn.Linear(1024, 9)

    def forward(self, x):
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = torch.max(x, 2)[0]
        iden = torch.eye(3, device=x.device).flatten()
        return (self.fc(x) + iden).view(-1, 3, 3)


class PointNetCls(nn.Module):
    def __init__(self, k=40, feature_transform=False):
        super().__init__()
        self.stn = STN3d()
        self.conv1 = nn.Conv1d(3, 64, 1)
        self.conv2 = nn.Conv1d(64, 1024, 1)
        self.fc = nn.Linear(1024, k)

    def forward(self, x):
        trans = self.stn(x)
        x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = torch.max(x, 2)[0]
        return F.log_softmax(self.fc(x), dim=1), trans, None


def feature_transform_regularizer(trans):
    d = trans.size()[1]
    eye = torch.eye(d, device=trans.device)[None, :, :]
    return torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - eye, dim=(1, 2)))
