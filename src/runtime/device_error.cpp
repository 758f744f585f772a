// Decoder of the device error record (device_error.hpp).
#include "xstage/runtime/device_error.hpp"

#include "xstage/common/error.hpp"

namespace xstage::runtime {

std::string describe(const DeviceError& e) {
  switch (DeviceErrorCode(e.code)) {
    case DeviceErrorCode::kNone:
      return "";
    case DeviceErrorCode::kLsaBarrierTimeout:
      return detail::concat("rank ", e.rank, ": LSA barrier ", e.index, " timed out waiting for rank ", e.peer,
                            " (inbox ", e.got, ", expected ", e.expected, ")");
    case DeviceErrorCode::kBurstBarrierTimeout:
      return detail::concat("rank ", e.rank, ": burst-start barrier of burst ", e.index, " timed out: ", e.got,
                            " of ", e.expected, " producers arrived");
    case DeviceErrorCode::kSignalTimeout:
      return detail::concat("rank ", e.rank, ": timed out waiting for rank ", e.peer, " on signal slot ", e.index,
                            " (saw ", e.got, ", needed >= ", e.expected, ")");
  }
  return detail::concat("rank ", e.rank, ": unknown device error code ", e.code);
}

}  // namespace xstage::runtime
