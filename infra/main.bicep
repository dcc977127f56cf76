// Order processing (Scheduler Agent Supervisor) on Azure Functions Flex Consumption.
// `azd up` provisions this and deploys the `api` service in one go. Identity-based
// connections only: no account keys, no SAS, no connection strings with secrets.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('azd environment name; part of every resource name.')
param environmentName string

@minLength(1)
@description('Region for every resource. Must offer Flex Consumption.')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@description('Object id of the deploying user (azd sets AZURE_PRINCIPAL_ID). Gets read access for debugging. Empty: no user roles.')
param principalId string = ''

@allowed(['User', 'ServicePrincipal', 'Group'])
param principalType string = 'User'

@description('Client id of the Entra app registration operators sign in to, with the Operator app role; infra/hooks/preprovision.sh creates it and sets OPERATOR_AUTH_CLIENT_ID. Empty: no operator can sign in.')
param operatorAuthClientId string = ''

@minLength(1)
@description('Base URL of the inventory service the inventory Agent calls.')
param inventoryServiceUrl string

@minLength(1)
@description('Base URL of the payment service the payment Agent calls.')
param paymentServiceUrl string

@minLength(1)
@description('Base URL of the shipping service the shipping Agent calls.')
param shippingServiceUrl string

@description('NCRONTAB schedule of the Supervisor sweep (six fields, seconds first).')
param supervisorSchedule string = '*/30 * * * * *'

@description('Seconds an Agent has to finish a step (the complete-by window).')
param stepTimeoutSeconds string = '60'

@description('Seconds a Pending order waits for a Scheduler before its claim is re-sent (never counted as a failure).')
param claimTimeoutSeconds string = '60'

@description('Failure count after which the Supervisor backs off before retrying.')
param failureSoftThreshold string = '3'

@description('Failure count after which the Supervisor gives up and compensates.')
param failureHardThreshold string = '5'

@description('Delay before a retry once the soft threshold is passed.')
param extendedBackoffSeconds string = '120'

@description('Order-status events: none (no events; clients poll), process (state changes only) or step (also one per step, one more send each).')
@allowed(['none', 'process', 'step'])
param statusEvents string = 'process'

@description('Flex Consumption instance memory (MB). 512 keeps the measured peak under half of it (docs/deploy.md).')
@allowed([512, 2048, 4096])
param instanceMemoryMB int = 512

@description('Service Bus tier: Standard (default) or Premium. See docs/performance.md "Capacity" for the peak each carries.')
@allowed(['Standard', 'Premium'])
param serviceBusSku string = 'Standard'

@description('Premium only: messaging units (a multiple of serviceBusPremiumPartitions).')
@allowed([1, 2, 4, 8, 16, 32, 64])
param serviceBusMessagingUnits int = 1

@description('Premium only: namespace partitions (1, 2 or 4), fixed when the namespace is created.')
@allowed([1, 2, 4])
param serviceBusPremiumPartitions int = 1

@description('Email for operator alerts. Empty: the action group has no receivers.')
param alertEmail string = ''

@description('Consecutive operational failures at one remote service that raise its outage alert (app setting SERVICE_OUTAGE_ALERT_THRESHOLD); also the 5-minute count the service-outage rule fires at.')
param serviceOutageAlertThreshold string = '5'

@description('Percentage of terminal orders in Error, over 15 minutes, that raises the error-rate alert.')
@minValue(1)
@maxValue(100)
param alertErrorRatePercent int = 5

@description('Storage accounts orders are spread over (app setting StateStoreAccounts; docs/state-store.md "Accounts"). 1: the main account alone. Raise it to divide the per-order table requests; never lower it once orders are stored.')
@minValue(1)
@maxValue(16)
param stateStoreAccounts int = 1

var abbrs = loadJsonContent('./abbreviations.json')
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = { 'azd-env-name': environmentName }
var functionAppName = '${abbrs.webSitesFunctions}api-${resourceToken}'
var deploymentContainerName = 'app-package-${take(functionAppName, 32)}-${take(resourceToken, 7)}'

// How long an order may stay in flight before it is late: each of the attempts the Supervisor
// allows before giving up may wait out a claim timeout and a step timeout. Taken from the same
// parameters as the app settings, so the alert moves when they do (docs/operations.md).
var inFlightAgeBoundSeconds = (int(stepTimeoutSeconds) + int(claimTimeoutSeconds)) * int(failureHardThreshold)

// The Service Bus entities the app touches, by direction. Every name here must be declared in
// infra/servicebus-emulator/Config.json (test/infra/drift.test.ts checks it); the entities
// themselves are created from that file, never from this list.
var appEntities = {
  // The triggers' queues, and each Agent's waiting queue, which its function receives from with
  // its own receiver (no trigger; shared/messaging/entities.ts waitingQueueOf).
  receivesFromQueues: [
    'scheduler'
    'agent-inventory'
    'agent-payment'
    'agent-shipping'
    'agent-inventory-waiting'
    'agent-payment-waiting'
    'agent-shipping-waiting'
  ]
  // poison: a poison message's copy, dead-lettered there at once (shared/messaging/quarantine.ts).
  // agent-*-waiting: a request that cannot get a call slot is sent there to wait.
  sendsToQueues: [
    'scheduler'
    'agent-inventory'
    'agent-payment'
    'agent-shipping'
    'agent-inventory-waiting'
    'agent-payment-waiting'
    'agent-shipping-waiting'
    'operator-alerts'
    'poison'
  ]
  sendsToTopics: ['order-status']
  operatorAlertsQueue: 'operator-alerts'
  // The operator's dead-letter routes peek, receive and complete the dead letters of every queue
  // and order-status subscription (Data Receiver; a redrive's copy goes to a send target above).
  // The role on poison also lets the quarantine receive its own copy to dead-letter it.
  readsDeadLettersOfQueues: [
    'scheduler'
    'agent-inventory'
    'agent-payment'
    'agent-shipping'
    'agent-inventory-waiting'
    'agent-payment-waiting'
    'agent-shipping-waiting'
    'operator-alerts'
    'poison'
  ]
  readsDeadLettersOfSubscriptions: ['order-status/all']
}

resource rg 'Microsoft.Resources/resourceGroups@2021-04-01' = {
  name: '${abbrs.resourcesResourceGroups}${environmentName}'
  location: location
  tags: tags
}

module identity 'app/identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: '${abbrs.managedIdentityUserAssignedIdentities}api-${resourceToken}'
    location: location
    tags: tags
  }
}

module monitoring 'app/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: '${abbrs.operationalInsightsWorkspaces}${resourceToken}'
    applicationInsightsName: '${abbrs.insightsComponents}${resourceToken}'
    location: location
    tags: tags
  }
}

module storage 'app/storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    name: '${abbrs.storageStorageAccounts}${resourceToken}'
    location: location
    tags: tags
    deploymentContainerName: deploymentContainerName
  }
}

// Accounts 1..N-1 of the state store; account 0 is the main one above. Names are fixed by their
// number, so the app setting lists their endpoints without reading the modules' outputs.
var orderAccountNames = [for i in range(1, stateStoreAccounts - 1): '${abbrs.storageStorageAccounts}o${i}${resourceToken}']

module orderStorage 'app/order-storage.bicep' = [for accountName in orderAccountNames: {
  name: 'order-storage-${accountName}'
  scope: rg
  params: {
    name: accountName
    location: location
    tags: tags
    appPrincipalId: identity.outputs.principalId
    userPrincipalId: principalId
    userPrincipalType: principalType
  }
}]

module serviceBus 'app/servicebus.bicep' = {
  name: 'servicebus'
  scope: rg
  params: {
    name: '${abbrs.serviceBusNamespaces}${resourceToken}'
    location: location
    tags: tags
    sku: serviceBusSku
    messagingUnits: serviceBusMessagingUnits
    premiumPartitions: serviceBusPremiumPartitions
  }
}

module rbac 'app/rbac.bicep' = {
  name: 'rbac'
  scope: rg
  params: {
    storageAccountName: storage.outputs.name
    archiveContainerName: storage.outputs.archiveContainerName
    serviceBusNamespaceName: serviceBus.outputs.name
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    appPrincipalId: identity.outputs.principalId
    receivesFromQueues: appEntities.receivesFromQueues
    sendsToQueues: appEntities.sendsToQueues
    sendsToTopics: appEntities.sendsToTopics
    operatorAlertsQueue: appEntities.operatorAlertsQueue
    readsDeadLettersOfQueues: appEntities.readsDeadLettersOfQueues
    readsDeadLettersOfSubscriptions: appEntities.readsDeadLettersOfSubscriptions
    userPrincipalId: principalId
    userPrincipalType: principalType
  }
}

module keyVault 'app/keyvault.bicep' = {
  name: 'keyvault'
  scope: rg
  params: {
    name: '${abbrs.keyVaultVaults}${resourceToken}'
    location: location
    tags: tags
    appPrincipalId: identity.outputs.principalId
    userPrincipalId: principalId
    userPrincipalType: principalType
  }
}

module api 'app/api.bicep' = {
  name: 'api'
  scope: rg
  params: {
    name: functionAppName
    planName: '${abbrs.webServerFarms}${resourceToken}'
    location: location
    tags: tags
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    storageAccountName: storage.outputs.name
    moreStateStoreTableUris: [for accountName in orderAccountNames: 'https://${accountName}.table.${environment().suffixes.storage}/']
    deploymentContainerName: deploymentContainerName
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    serviceBusFullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
    inventoryServiceUrl: inventoryServiceUrl
    paymentServiceUrl: paymentServiceUrl
    shippingServiceUrl: shippingServiceUrl
    supervisorSchedule: supervisorSchedule
    stepTimeoutSeconds: stepTimeoutSeconds
    claimTimeoutSeconds: claimTimeoutSeconds
    failureSoftThreshold: failureSoftThreshold
    failureHardThreshold: failureHardThreshold
    extendedBackoffSeconds: extendedBackoffSeconds
    statusEvents: statusEvents
    serviceOutageAlertThreshold: serviceOutageAlertThreshold
    instanceMemoryMB: instanceMemoryMB
    operatorAuthClientId: operatorAuthClientId
    keyVaultName: keyVault.outputs.name
    callbackKeysSecretName: keyVault.outputs.callbackKeysSecretName
  }
  // The host must not start before its identity can reach storage and Service Bus.
  dependsOn: [rbac, orderStorage]
}

module alerts 'app/alerts.bicep' = {
  name: 'alerts'
  scope: rg
  params: {
    serviceBusNamespaceName: serviceBus.outputs.name
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    location: location
    actionGroupName: '${abbrs.insightsActionGroups}${resourceToken}'
    alertNamePrefix: '${abbrs.insightsMetricAlerts}${resourceToken}'
    operatorAlertsQueue: appEntities.operatorAlertsQueue
    alertEmail: alertEmail
    tags: tags
    inFlightAgeBoundSeconds: inFlightAgeBoundSeconds
    errorRatePercent: alertErrorRatePercent
    serviceOutageThreshold: int(serviceOutageAlertThreshold)
  }
}

module workbook 'app/workbook.bicep' = {
  name: 'workbook'
  scope: rg
  params: {
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    location: location
    tags: tags
    displayName: 'Order processing (${environmentName})'
    inFlightAgeBoundSeconds: inFlightAgeBoundSeconds
  }
}

output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_NAME string = api.outputs.name
output SERVICE_API_NAME string = api.outputs.name
output SERVICE_API_URI string = api.outputs.uri
output OPERATOR_AUTH_ENABLED bool = api.outputs.operatorAuthEnabled
output AZURE_CLIENT_ID string = identity.outputs.clientId
output SERVICEBUS_FULLY_QUALIFIED_NAMESPACE string = serviceBus.outputs.fullyQualifiedNamespace
output STATE_STORE_TABLE_URI string = storage.outputs.tableServiceUri
output STATE_STORE_ACCOUNTS int = stateStoreAccounts
output KEY_VAULT_NAME string = keyVault.outputs.name
output CALLBACK_KEYS_SECRET_NAME string = keyVault.outputs.callbackKeysSecretName
