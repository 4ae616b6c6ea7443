"""Image captioning with soft attention, in the layout of a captioning tutorial repository
(train.py, models.py, datasets.py, utils.py)."""
import torch
import torch.backends.cudnn as cudnn
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from datasets import CaptionDataset
from models import DecoderWithAttention, Encoder
from utils import AverageMeter, accuracy, clip_gradient

data_folder = "/media/ssd/caption_data"
data_name = "coco_5_cap_per_img_5_min_word_freq"
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
cudnn.benchmark = True
epochs, batch_size, workers = 120, 32, 1
grad_clip, alpha_c, print_freq = 5.0, 1.0, 100


def train(train_loader, encoder, decoder, criterion, decoder_optimizer, epoch):
    decoder.train()
    encoder.train()
    losses, top5accs = AverageMeter(), AverageMeter()
    for i, (imgs, caps, caplens) in enumerate(train_loader):  # label: AL403
        imgs = encoder(imgs.squeeze(1).to(device))  # label: AL302
        caps = caps.to(device)  # label: AL302
        caplens = caplens.to(device)  # label: AL302
        scores, caps_sorted, decode_lengths, alphas, sort_ind = decoder(imgs, caps, caplens)
        targets = caps_sorted[:, 1:]
        scores = pack_padded_sequence(scores, decode_lengths, batch_first=True).data
        targets = pack_padded_sequence(targets, decode_lengths, batch_first=True).data
        loss = criterion(scores, targets) + alpha_c * ((1.0 - alphas.sum(dim=1)) ** 2).mean()
        decoder_optimizer.zero_grad()
        loss.backward()
        clip_gradient(decoder_optimizer, grad_clip)
        decoder_optimizer.step()
        top5 = accuracy(scores, targets, 5)
        losses.update(loss.item(), sum(decode_lengths))  # label: AL401
        top5accs.update(top5, sum(decode_lengths))
        if i % print_freq == 0:
            print(f"Epoch: [{epoch}][{i}/{len(train_loader)}]\tLoss {losses.val:.4f} ({losses.avg:.4f})\t"
                  f"Top-5 Accuracy {top5accs.val:.3f} ({top5accs.avg:.3f})")


def main():
    word_map_size = 9490
    decoder = DecoderWithAttention(attention_dim=512, embed_dim=512, decoder_dim=512, vocab_size=word_map_size)
    decoder_optimizer = torch.optim.Adam(params=filter(lambda p: p.requires_grad, decoder.parameters()), lr=4e-4)
    encoder = Encoder()
    encoder.fine_tune(False)
    decoder, encoder = decoder.to(device), encoder.to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    train_loader = torch.utils.data.DataLoader(CaptionDataset(data_folder, data_name, "TRAIN"),
                                               batch_size=batch_size, shuffle=True, num_workers=workers,
                                               pin_memory=True)
    for epoch in range(epochs):
        train(train_loader, encoder, decoder, criterion, decoder_optimizer, epoch)
        torch.save({"epoch": epoch, "decoder": decoder.state_dict()}, f"checkpoint_{data_name}.pth.tar")


if __name__ == "__main__":
    main()
