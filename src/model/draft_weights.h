// The drafters' weights as the backends see them (model-spec 3): the MTP stage of the original V4 (`mtp.0.*`) and the
// three DSpark stages of -0731 (`mtp.0-2.*`). Each stage's block has a backbone layer's layout (LayerWeights, a
// sliding-window layer with learned routing); the embedding and the head are the target's (ModelWeights).
#pragma once

#include <optional>
#include <vector>

#include "backend/weights.h"
#include "model/tensor_spec.h"

namespace dsv4 {

struct MtpStageWeights {
    LayerWeights block;
    WeightRef e_proj, h_proj;  // [D, D]
    VecRef enorm, hnorm, norm;
    HcHeadWeights hc_head;
};

struct DsparkWeights {
    std::vector<LayerWeights> stages;  // 3 blocks
    WeightRef main_proj;               // [D, targets * D]
    VecRef main_norm, norm;            // main_norm: stage 0; norm: last stage
    HcHeadWeights hc_head;             // last stage
    WeightRef markov_w1, markov_w2;    // BF16 [vocab, rank]: the Markov head's input embedding and output matrix
    WeightRef confidence_h;            // BF16 [1, D]: the confidence head's columns over h_k
    WeightRef confidence_m;            // BF16 [1, rank]: ... over markov_w1[d_k]
};

struct DraftWeights {
    DraftLayout layout;
    std::vector<MtpStageWeights> mtp;  // layout.kind == kMtp
    std::optional<DsparkWeights> dspark;
};

}  // namespace dsv4
