#pragma once
// The C ABI's team and buffer handles (team.h), shared by team_api.cpp and the Ulysses layer's C ABI.
#include <cstdint>
#include <memory>

#include "xstage/runtime/comm.hpp"
#include "xstage/runtime/team.hpp"
#include "xstage/team.h"

struct xstage_team_s {
  std::unique_ptr<xstage::runtime::Communicator> comm;  // real teams only
  std::unique_ptr<xstage::runtime::Team> team;
  std::unique_ptr<xstage::runtime::SignalSet> signals;  // created with the team: one slot per fused kernel kind
  // xstage_attn_fwd_to_peers calls launched on this team, and the CTAs they launched per rank: the completion
  // target is that sum (each CTA signals each destination once), so calls of different shapes may follow each
  // other; a refused call adds nothing.
  uint32_t attn_calls = 0, attn_sent = 0;
};
struct xstage_buffer_s {
  xstage_team team;
  std::unique_ptr<xstage::runtime::SymmetricBuffer> buf;
};

