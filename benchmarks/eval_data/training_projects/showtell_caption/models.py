"""A ResNet encoder and an LSTM decoder with additive attention over the encoder's grid."""
import torch
import torchvision
from torch import nn


class Encoder(nn.Module):
    def __init__(self, encoded_image_size=14):
        super().__init__()
        resnet = torchvision.models.resnet101(weights=None)
        self.resnet = nn.Sequential(*list(resnet.children())[:-2])
        self.adaptive_pool = nn.AdaptiveAvgPool2d((encoded_image_size, encoded_image_size))

    def forward(self, images):
        return self.adaptive_pool(self.resnet(images)).permute(0, 2, 3, 1)

    def fine_tune(self, fine_tune=True):
        for p in self.resnet.parameters():
            p.requires_grad = False
        for c in list(self.resnet.children())[5:]:
            for p in c.parameters():
                p.requires_grad = fine_tune


class Attention(nn.Module):
    def __init__(self, encoder_dim, decoder_dim, attention_dim):
        super().__init__()
        self.encoder_att = nn.Linear(encoder_dim, attention_dim)
        self.decoder_att = nn.Linear(decoder_dim, attention_dim)
        self.full_att = nn.Linear(attention_dim, 1)

    def forward(self, encoder_out, decoder_hidden):
        att = self.full_att(torch.relu(self.encoder_att(encoder_out) + self.decoder_att(decoder_hidden).unsqueeze(1)))
        alpha = torch.softmax(att.squeeze(2), dim=1)
        return (encoder_out * alpha.unsqueeze(2)).sum(dim=1), alpha


class DecoderWithAttention(nn.Module):
    def __init__(self, attention_dim, embed_dim, decoder_dim, vocab_size, encoder_dim=2048, dropout=0.5):
        super().__init__()
        self.vocab_size = vocab_size
        self.attention = Attention(encoder_dim, decoder_dim, attention_dim)
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.dropout = nn.Dropout(p=dropout)
        self.decode_step = nn.LSTMCell(embed_dim + encoder_dim, decoder_dim, bias=True)
        self.init_h = nn.Linear(encoder_dim, decoder_dim)
        self.init_c = nn.Linear(encoder_dim, decoder_dim)
        self.f_beta = nn.Linear(decoder_dim, encoder_dim)
        self.fc = nn.Linear(decoder_dim, vocab_size)

    def forward(self, encoder_out, encoded_captions, caption_lengths):
        batch_size = encoder_out.size(0)
        encoder_out = encoder_out.view(batch_size, -1, encoder_out.size(-1))
        caption_lengths, sort_ind = caption_lengths.squeeze(1).sort(dim=0, descending=True)
        encoder_out = encoder_out[sort_ind]
        encoded_captions = encoded_captions[sort_ind]
        embeddings = self.embedding(encoded_captions)
        mean_out = encoder_out.mean(dim=1)
        h, c = self.init_h(mean_out), self.init_c(mean_out)
        decode_lengths = (caption_lengths - 1).tolist()  # label: AL401
        predictions = torch.zeros(batch_size, max(decode_lengths), self.vocab_size, device=encoder_out.device)
        alphas = torch.zeros(batch_size, max(decode_lengths), encoder_out.size(1), device=encoder_out.device)
        for t in range(max(decode_lengths)):
            batch_size_t = sum([length > t for length in decode_lengths])
            awe, alpha = self.attention(encoder_out[:batch_size_t], h[:batch_size_t])
            awe = torch.sigmoid(self.f_beta(h[:batch_size_t])) * awe
            h, c = self.decode_step(torch.cat([embeddings[:batch_size_t, t, :], awe], dim=1),
                                    (h[:batch_size_t], c[:batch_size_t]))
            predictions[:batch_size_t, t, :] = self.fc(self.dropout(h))
            alphas[:batch_size_t, t, :] = alpha
        return predictions, encoded_captions, decode_lengths, alphas, sort_ind
