"""The transaction coordinator (KIP-98), sans-IO; its driver is broker.txn_driver.

Public surface:

    TransactionCoordinator, TxnConfig    the state machine over `__transaction_state`
    TransactionMetadata, TxnState        one transactional id's state
    TxnOutput, MarkerRequest, TxnResult  what its calls hand back
"""
from broker.transactions.coordinator import TransactionCoordinator, TxnConfig
from broker.transactions.metadata import TopicPartition, TransactionMetadata, TxnState
from broker.transactions.results import MarkerRequest, TxnOutput, TxnResult

__all__ = ["MarkerRequest", "TopicPartition", "TransactionCoordinator", "TransactionMetadata", "TxnConfig",
           "TxnOutput", "TxnResult", "TxnState"]
