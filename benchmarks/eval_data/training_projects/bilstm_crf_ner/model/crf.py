"""A linear-chain CRF with start and stop tags."""
import torch
import torch.nn as nn

START_TAG, STOP_TAG = -2, -1


def log_sum_exp(vec, m_size):
    _, idx = torch.max(vec, 1)
    max_score = torch.gather(vec, 1, idx.view(-1, 1, m_size)).view(-1, 1, m_size)
    return max_score.view(-1, m_size) + torch.log(torch.sum(torch.exp(vec - max_score.expand_as(vec)), 1)).view(-1, m_size)


class CRF(nn.Module):
    def __init__(self, tagset_size, gpu):
        super().__init__()
        self.tagset_size = tagset_size + 2
        init_transitions = torch.zeros(self.tagset_size, self.tagset_size)
        init_transitions[:, START_TAG] = -10000.0
        init_transitions[STOP_TAG, :] = -10000.0
        if gpu:
            init_transitions = init_transitions.cuda()
        self.transitions = nn.Parameter(init_transitions)

    def _calculate_PZ(self, feats, mask):
        batch_size, seq_len, tag_size = feats.size()
        mask = mask.transpose(1, 0).contiguous()
        scores = (feats.transpose(1, 0).contiguous().view(seq_len * batch_size, 1, tag_size).expand(
            seq_len * batch_size, tag_size, tag_size) + self.transitions.view(1, tag_size, tag_size)).view(
            seq_len, batch_size, tag_size, tag_size)
        partition = scores[0][:, START_TAG, :].clone().view(batch_size, tag_size, 1)
        for idx in range(1, seq_len):
            cur_values = scores[idx] + partition.contiguous().view(batch_size, tag_size, 1).expand(batch_size, tag_size, tag_size)
            cur_partition = log_sum_exp(cur_values, tag_size)
            mask_idx = mask[idx, :].view(batch_size, 1).expand(batch_size, tag_size)
            partition = torch.where(mask_idx.bool(), cur_partition, partition.view(batch_size, tag_size)).view(batch_size, tag_size, 1)
        final = partition.expand(batch_size, tag_size, tag_size) + self.transitions.view(1, tag_size, tag_size)
        return log_sum_exp(final, tag_size)[:, STOP_TAG].sum(), scores

    def _score_sentence(self, scores, mask, tags):
        seq_len, batch_size = scores.size(0), scores.size(1)
        new_tags = tags * self.tagset_size
        new_tags[:, 1:] += tags[:, :-1]
        new_tags[:, 0] += (self.tagset_size - 2) * self.tagset_size
        end_transition = self.transitions[:, STOP_TAG].contiguous().view(1, self.tagset_size).expand(batch_size, self.tagset_size)
        length_mask = torch.sum(mask.long(), dim=1).view(batch_size, 1).long()
        end_ids = torch.gather(tags, 1, length_mask - 1)
        end_energy = torch.gather(end_transition, 1, end_ids)
        tg_energy = torch.gather(scores.view(seq_len, batch_size, -1), 2,
                                 new_tags.transpose(1, 0).contiguous().view(seq_len, batch_size, 1)).view(seq_len, batch_size)
        tg_energy = tg_energy.masked_select(mask.transpose(1, 0))  # label: AL401
        return tg_energy.sum() + end_energy.sum()

    def neg_log_likelihood_loss(self, feats, mask, tags):
        forward_score, scores = self._calculate_PZ(feats, mask)
        return forward_score - self._score_sentence(scores, mask, tags)

    def _viterbi_decode(self, feats, mask):
        batch_size, seq_len, tag_size = feats.size()
        scores = feats.transpose(1, 0).unsqueeze(-1) + self.transitions.view(1, 1, tag_size, tag_size)
        partition = scores[0][:, START_TAG, :]
        back_points = []
        for idx in range(1, seq_len):
            cur_values = scores[idx] + partition.unsqueeze(-1)
            partition, cur_bp = torch.max(cur_values, 1)
            back_points.append(cur_bp)
        pointer = partition.argmax(-1)
        decode_idx = [pointer]
        for bp in reversed(back_points):
            pointer = bp.gather(1, pointer.view(-1, 1)).view(-1)
            decode_idx.insert(0, pointer)
        return partition.max(-1)[0], torch.stack(decode_idx, 1)
