#pragma once
// libnats (NATS and JetStream, Debian's libnats3.4), loaded when first
// used: every other flightrec command starts without it, and it brings
// its own shared OpenSSL, kept apart from the one linked into flightrec
// (RTLD_LOCAL). Its header gives the types; these are its functions.
#include <nats/nats.h>

#include <string>

namespace flightrec::ship {

struct NatsLib {
#define FLIGHTREC_NATS_FUNCTIONS(X)                                                                             \
  X(natsOptions_Create) X(natsOptions_Destroy) X(natsOptions_SetURL) X(natsOptions_SetTimeout)                  \
  X(natsOptions_SetMaxReconnect) X(natsOptions_SetReconnectWait) X(natsOptions_SetName)                         \
  X(natsOptions_SetSecure) X(natsOptions_LoadCATrustedCertificates) X(natsConnection_Connect)                  \
  X(natsConnection_Destroy) X(natsConnection_JetStream) X(jsCtx_Destroy) X(jsOptions_Init)                      \
  X(jsStreamConfig_Init) X(js_AddStream) X(js_GetStreamInfo) X(jsStreamInfo_Destroy) X(natsMsg_Create)          \
  X(natsMsgHeader_Set) X(natsMsgHeader_Get) X(natsMsg_Destroy) X(natsMsg_GetData) X(natsMsg_GetDataLength)      \
  X(natsMsg_GetSubject) X(js_PublishMsgAsync) X(js_PublishAsyncComplete) X(js_PublishAsyncGetPendingList)       \
  X(natsMsgList_Destroy) X(natsStatus_GetText) X(nats_GetLastError) X(jsSubOptions_Init) X(js_PullSubscribe)    \
  X(natsSubscription_Fetch) X(natsSubscription_Destroy) X(natsMsg_Ack) X(js_PublishMsg) X(jsPubAck_Destroy)
#define FLIGHTREC_NATS_POINTER(f) decltype(&::f) f = nullptr;
  FLIGHTREC_NATS_FUNCTIONS(FLIGHTREC_NATS_POINTER)
#undef FLIGHTREC_NATS_POINTER

  // What a failed call said: the library's last error, else the status's text.
  std::string error(natsStatus s) const;
};

// The library, loaded once; throws Error saying why it cannot be.
const NatsLib& nats_lib();

}  // namespace flightrec::ship
