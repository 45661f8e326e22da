print("outbox-engine")
